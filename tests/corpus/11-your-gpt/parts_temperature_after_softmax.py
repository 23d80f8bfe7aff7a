# next_token_distribution pasted with the temperature applied after the softmax: renormalising undoes it.
# expect: partial
# hint: as if the temperature were 1
# %% cell: parts
def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    probs = torch.softmax(logits, dim=-1) / temperature
    probs = probs / probs.sum(-1, keepdim=True)
    if top_k is not None:
        kth = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values[..., -1:]
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(-1, keepdim=True)
    if top_p is not None:
        ordered, order = probs.sort(dim=-1, descending=True)
        ordered = torch.where(ordered.cumsum(-1) - ordered < top_p, ordered, torch.zeros_like(ordered))
        probs = torch.zeros_like(probs).scatter(-1, order, ordered)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs
