# Top-p keeps tokens while the running sum is below top_p, so it drops the token that crosses it.
# expect: partial
# hint: keeps one token too few
# %% cell: sampling
def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    probs = torch.softmax(logits / temperature, dim=-1)
    if top_k is not None:
        kth = probs.topk(min(top_k, probs.shape[-1]), dim=-1).values[..., -1:]
        probs = torch.where(probs >= kth, probs, torch.zeros_like(probs))
        probs = probs / probs.sum(-1, keepdim=True)
    if top_p is not None:
        ordered, order = probs.sort(dim=-1, descending=True)
        keep = ordered.cumsum(-1) < top_p
        keep[..., 0] = True
        probs = torch.zeros_like(probs).scatter(-1, order, ordered * keep)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs
