# A Categorical distribution's sample(): the right distribution, but not the generator's draws.
# expect: partial
# hint: not the ones torch.multinomial(probs, 1, generator=generator) draws
# %% cell: sampling
def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    probs = next_token_distribution(logits, temperature, top_k, top_p)
    return torch.distributions.Categorical(probs=probs).sample()
