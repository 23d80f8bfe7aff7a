# Loops max_len + 1 times ("up to and including max_len").
# expect: partial
# hint: max_len + 1 tokens
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    seq = torch.full((src.shape[0], 1), start_token, dtype=src.dtype, device=src.device)
    for i in range(max_len + 1):
        next_token = model(src, seq)[:, -1].argmax(-1, keepdim=True).to(src.dtype)
        seq = torch.cat([seq, next_token], dim=1)
    return seq[:, 1:]
