# Correct: the tokens kept in a Python list, softmax before the argmax, stacked at the end.
# expect: full
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    tokens = [torch.full((src.shape[0],), start_token, dtype=src.dtype, device=src.device)]
    for _ in range(max_len):
        with torch.no_grad():
            probs = torch.softmax(model(src, torch.stack(tokens, dim=1)), dim=-1)
        tokens.append(probs[:, -1, :].max(dim=-1).indices.to(src.dtype))
    return torch.stack(tokens[1:], dim=1)
