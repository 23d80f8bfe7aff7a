# range(max_len - 1): one token too few.
# expect: partial
# hint: max_len - 1 tokens
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    out = torch.full((src.shape[0], 1), start_token, dtype=src.dtype, device=src.device)
    with torch.no_grad():
        for _ in range(max_len - 1):
            nxt = model(src, out)[:, -1].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt.to(src.dtype)], dim=1)
    return out[:, 1:]
