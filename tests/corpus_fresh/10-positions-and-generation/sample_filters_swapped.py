# Passes top_p where top_k goes and top_k where top_p goes.
# expect: partial
# graded: sample_next
# locus: swapped|top_p as top_k|order of the arguments|argument
# %% cell: sampling
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """(B, V) logits -> (B,) int64: one token per row, drawn from next_token_distribution."""
    dist = next_token_distribution(logits, temperature, top_p, top_k)  # (B, V)
    return torch.multinomial(dist, num_samples=1, generator=generator)[:, 0]  # (B,)
