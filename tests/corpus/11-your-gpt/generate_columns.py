# Correct: appends to a list of columns and concatenates them at the end, the prompt kept apart.
# expect: full
# %% cell: generate
@torch.no_grad()
def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None,
             cache=None):
    columns = []
    feed = prompt
    for _ in range(max_new_tokens):
        if cache is not None:
            logits = model(feed, cache)
        else:
            logits = model(torch.cat([prompt] + columns, dim=1))
        nxt = sample_next(logits[:, -1], temperature=temperature, top_k=top_k, top_p=top_p, generator=generator)
        columns.append(nxt.unsqueeze(1))
        feed = columns[-1]
    return torch.cat(columns, dim=1)
