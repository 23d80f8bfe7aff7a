# Correct: the Hugging Face way, filtering the logits with -inf (top-p on ascending sorted
# probabilities, dropping those whose cumulative sum is <= 1 - top_p) and one softmax at the end.
# expect: full
# %% cell: sampling
def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.size(-1))).values[..., -1, None]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None:
        sorted_logits, sorted_idx = torch.sort(logits, descending=False)
        cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove = cumulative <= (1 - top_p)
        remove[..., -1:] = False  # keep at least the most probable token
        logits = logits.masked_fill(remove.scatter(-1, sorted_idx, remove), float("-inf"))
    return logits.softmax(dim=-1)


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    probs = next_token_distribution(logits, temperature=temperature, top_k=top_k, top_p=top_p)
    return torch.multinomial(probs, num_samples=1, generator=generator)[:, 0]
