# Correct: apply_rope views the halves as one (..., 2, D/2) pair axis and stacks the rotated
# halves back; ALiBi built head by head in a loop with math.pow; next_token_distribution filters
# row by row in a Python loop (sorted once per row, a boolean mask of what is kept) and renormalises
# in place; sample_next under torch.no_grad(); beam search keeps a dictionary from token tuples
# to scores and sorts it. A scratch cell draws a histogram of samples with matplotlib. Full marks.
# expect: full
# %% cell: apply_rope
def apply_rope(x, positions, base=10000.0):
    D = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, device=x.device, dtype=x.dtype) / D))
    theta = positions.to(x.dtype)[:, None] * inv_freq[None, :]  # (L, D/2)
    x1, x2 = x.unflatten(-1, (2, D // 2)).unbind(dim=-2)
    rotated = torch.stack((x1 * theta.cos() - x2 * theta.sin(), x1 * theta.sin() + x2 * theta.cos()), dim=-2)
    return rotated.flatten(-2)
# %% cell: alibi_bias
def alibi_bias(num_heads, L, S):
    heads = []
    for h in range(num_heads):
        slope = math.pow(2.0, -8.0 * (h + 1) / num_heads)
        bias = torch.zeros(L, S)
        for i in range(L):
            bias[i] = -slope * (i + S - L - torch.arange(S, dtype=torch.float32))
        heads.append(bias)
    return torch.stack(heads)
# %% cell: sampling
def next_token_distribution(logits, temperature=1.0, top_k=None, top_p=None):
    probs = (logits / temperature).softmax(-1)
    rows = []
    for row in probs:
        ordered, order = torch.sort(row, descending=True)
        keep = torch.ones_like(ordered, dtype=torch.bool)
        if top_k is not None:
            keep &= ordered >= ordered[min(top_k, len(ordered)) - 1]
            ordered = ordered * keep
            ordered = ordered / ordered.sum()
        if top_p is not None:
            keep &= (torch.cumsum(ordered, 0) - ordered) < top_p
        kept = ordered * keep
        kept /= kept.sum()
        rows.append(torch.zeros_like(row).index_copy(0, order, kept))
    return torch.stack(rows)


def sample_next(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    with torch.no_grad():
        dist = next_token_distribution(logits, temperature, top_k, top_p)
        return torch.multinomial(dist, num_samples=1, replacement=True, generator=generator)[:, 0]
# %% cell: beam_search
def beam_search(step_fn, start, beam_size, max_len, eos):
    beam = {(start,): 0.0}
    done = {}
    for step in range(max_len):
        if not beam:
            break
        prefixes = list(beam)
        logp = step_fn(torch.tensor(prefixes, dtype=torch.int64))
        scored = {}
        for prefix, row in zip(prefixes, logp):
            for token in range(row.shape[0]):
                scored[prefix + (token,)] = beam[prefix] + row[token].item()
        best = sorted(scored.items(), key=lambda item: item[1], reverse=True)[:beam_size]
        beam = {}
        for tokens, score in best:
            (done if tokens[-1] == eos else beam)[tokens] = score
    everything = {**done, **beam}
    tokens = max(everything, key=lambda t: everything[t] / (len(t) - 1))
    return torch.tensor(tokens[1:]), everything[tokens] / (len(tokens) - 1)
# %% new cell after: test_sample_next
import matplotlib.pyplot as plt

logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
draws = [sample_next(logits, top_p=0.9).item() for _ in range(200)]
plt.hist(draws, bins=range(5))
plt.show()
