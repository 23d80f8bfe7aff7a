# Calls the model on the start token alone every time.
# expect: partial
# hint: predicted from the start token alone
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    start = torch.full((src.shape[0], 1), start_token, dtype=src.dtype, device=src.device)
    tokens = []
    with torch.no_grad():
        for _ in range(max_len):
            tokens.append(model(src, start)[:, -1].argmax(-1))
    return torch.stack(tokens, dim=1).to(src.dtype)
