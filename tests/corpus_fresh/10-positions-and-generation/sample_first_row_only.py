# Indexes the draws with [0] instead of [:, 0]: one row's draw (shape (1,)) for the whole batch.
# expect: partial
# graded: sample_next
# locus: (B,)|[:, 0]|one per row|every row|one token per row
# %% cell: sampling
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    """(B, V) logits -> (B,) int64: one token per row, drawn from next_token_distribution."""
    dist = next_token_distribution(logits, temperature, top_k, top_p)  # (B, V)
    return torch.multinomial(dist, num_samples=1, generator=generator)[0]  # (B,)
