# Takes the most probable token instead of sampling it.
# expect: partial
# hint: most probable ones
# %% cell: generate
def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None,
             cache=None):
    """The max_new_tokens tokens drawn after prompt (B, P): (B, max_new_tokens) int64."""
    with torch.no_grad():
        tokens, new = prompt, []
        logits = model(prompt, cache)  # (B, P, vocab)
        for step in range(max_new_tokens):
            token = logits[:, -1].argmax(dim=-1)  # (B,)
            new.append(token)
            tokens = torch.cat([tokens, token[:, None]], dim=1)
            if step + 1 < max_new_tokens:
                logits = model(token[:, None], cache) if cache is not None else model(tokens)
        return torch.stack(new, dim=1)
