# Zeroes the filtered tokens but never renormalises (multinomial does not mind; the distribution is wrong).
# expect: partial
# hint: do not sum to 1
# Its top-p then runs on what top-k kept, not renormalised, which sample_next's hint names:
# also: top-p on the distribution that top-k kept (renormalised)
# %% cell: sampling
def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_k is not None:
        kth = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values[..., -1:]
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
    if top_p is not None:
        ordered, order = probs.sort(dim=-1, descending=True)
        ordered = torch.where(ordered.cumsum(-1) - ordered < top_p, ordered, torch.zeros_like(ordered))
        probs = torch.zeros_like(probs).scatter(-1, order, ordered)
    return probs
