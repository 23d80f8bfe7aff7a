# Feeds the model only the token generated last, as one steps an RNN.
# expect: partial
# hint: from the previous token alone
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    current = torch.full((src.shape[0], 1), start_token, dtype=src.dtype, device=src.device)
    generated = []
    for _ in range(max_len):
        current = model(src, current)[:, -1].argmax(dim=-1, keepdim=True).to(src.dtype)
        generated.append(current)
    return torch.cat(generated, dim=1)
