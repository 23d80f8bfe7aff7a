# Samples the next token from the softmax instead of taking the most likely one.
# expect: partial
# hint: are they sampled
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    ys = torch.full((src.size(0), 1), start_token, dtype=src.dtype, device=src.device)
    for _ in range(max_len):
        probs = torch.softmax(model(src, ys)[:, -1], dim=-1)
        nxt = torch.multinomial(probs, num_samples=1).to(src.dtype)
        ys = torch.cat([ys, nxt], dim=1)
    return ys[:, 1:]
