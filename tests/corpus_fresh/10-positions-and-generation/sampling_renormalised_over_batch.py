# Renormalises over dim 0 (the batch) after the filters instead of over each row.
# expect: partial
# graded: next_token_distribution
# locus: sum to 1|renormalis|each row|dim=-1|over the batch|dim=0
# %% cell: sampling
def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    """(B, V) logits -> (B, V) probabilities: temperature, then top-k, then top-p, renormalised."""
    p = (logits / temperature).softmax(dim=-1)  # (B, V)
    if top_k is not None:
        kth_largest = torch.topk(p, min(top_k, p.size(-1)), dim=-1).values[..., -1:]  # (B, 1)
        p = p.masked_fill(p < kth_largest, 0.0)
        p = p / p.sum(dim=0, keepdim=True)
    if top_p is not None:
        sorted_p, idx = torch.sort(p, dim=-1, descending=True)  # (B, V)
        mass_before = torch.cumsum(sorted_p, dim=-1) - sorted_p  # probability of the tokens ranked above
        sorted_p = sorted_p.masked_fill(mass_before >= top_p, 0.0)
        p = torch.zeros_like(p).scatter(-1, idx, sorted_p)
        p = p / p.sum(dim=-1, keepdim=True)
    return p
