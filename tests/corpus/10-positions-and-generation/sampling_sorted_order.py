# Top-p on the sorted probabilities, returned as they are: most probable first, not in the tokens' order.
# expect: partial
# hint: in sorted order (most probable first)
# %% cell: sampling
def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_k is not None:
        kth = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values[..., -1:]
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(-1, keepdim=True)
    if top_p is not None:
        ordered, _ = probs.sort(dim=-1, descending=True)
        ordered = torch.where(ordered.cumsum(-1) - ordered < top_p, ordered, torch.zeros_like(ordered))
        probs = ordered / ordered.sum(-1, keepdim=True)
    return probs
