# Draws each token from a Categorical distribution over the logits (as a language-model demo does).
# expect: partial
# hint: are they sampled
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    tokens = [torch.full((src.shape[0],), start_token, dtype=src.dtype, device=src.device)]
    with torch.no_grad():
        for step in range(max_len):
            logits = model(src, torch.stack(tokens, dim=1))
            dist = torch.distributions.Categorical(logits=logits[:, -1, :])
            tokens.append(dist.sample().to(src.dtype))
    return torch.stack(tokens[1:], dim=1)
