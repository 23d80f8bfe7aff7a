# Returns the start token with the generated ones.
# expect: partial
# hint: starts with the start token
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    out = torch.full((src.shape[0], 1), start_token, dtype=src.dtype, device=src.device)
    with torch.no_grad():
        for _ in range(max_len):
            nxt = model(src, out)[:, -1].argmax(-1, keepdim=True)
            out = torch.cat([out, nxt.to(src.dtype)], dim=1)
    return out
