# Top-k sampling (k = 3) instead of the argmax.
# expect: partial
# hint: are they sampled
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    out = torch.full((src.shape[0], 1), start_token, dtype=src.dtype, device=src.device)
    for _ in range(max_len):
        last = model(src, out)[:, -1]
        values, indices = last.topk(min(3, last.shape[-1]), dim=-1)
        pick = torch.multinomial(values.softmax(-1), 1)
        out = torch.cat([out, indices.gather(-1, pick).to(src.dtype)], dim=1)
    return out[:, 1:]
