# Passes temperature 1.0 to next_token_distribution whatever it is given.
# expect: partial
# graded: sample_next
# locus: temperature
# %% cell: sampling
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """(B, V) logits -> (B,) int64: one token per row, drawn from next_token_distribution."""
    dist = next_token_distribution(logits, 1.0, top_k, top_p)  # (B, V)
    return torch.multinomial(dist, num_samples=1, generator=generator)[:, 0]  # (B,)
