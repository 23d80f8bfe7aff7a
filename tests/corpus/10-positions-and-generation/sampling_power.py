# Correct: the temperature as a power of the probabilities (p^(1/T), renormalised, is softmax(logits / T)),
# top-k and top-p by boolean masks on the sorted probabilities, renormalised once.
# expect: full
# %% cell: sampling
def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    probs = torch.softmax(logits, dim=-1) ** (1.0 / temperature)
    probs = probs / probs.sum(dim=-1, keepdim=True)
    ordered, order = probs.sort(dim=-1, descending=True)
    keep = torch.ones_like(ordered, dtype=torch.bool)
    if top_k is not None:
        keep[..., top_k:] = False
    if top_p is not None:
        kept = ordered * keep
        kept = kept / kept.sum(dim=-1, keepdim=True)
        keep &= (kept.cumsum(dim=-1) - kept) < top_p
    mask = torch.zeros_like(keep).scatter(-1, order, keep)
    probs = probs * mask
    return probs / probs.sum(dim=-1, keepdim=True)


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    probs = next_token_distribution(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, 1, generator=generator).view(-1)
