# A right distribution, but sample_next takes its most probable token.
# expect: partial
# hint: You take the most probable token
# %% cell: sampling
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return next_token_distribution(logits, temperature, top_k, top_p).argmax(dim=-1)
