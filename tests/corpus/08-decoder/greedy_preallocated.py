# Correct: a preallocated output, filled one column at a time.
# expect: full
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    B = src.shape[0]
    out = torch.empty(B, max_len + 1, dtype=src.dtype, device=src.device)
    out[:, 0] = start_token
    with torch.no_grad():
        for t in range(max_len):
            logits = model(src, out[:, : t + 1])
            out[:, t + 1] = logits[:, t].argmax(-1)
    return out[:, 1:]
