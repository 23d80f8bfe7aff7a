# Feeds only the token just drawn at every step, cache or not: without a cache the model forgets the text.
# expect: partial
# hint: sees only the last token after the prompt
# %% cell: generate
def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None,
             cache=None):
    """The max_new_tokens tokens drawn after prompt (B, P): (B, max_new_tokens) int64."""
    with torch.no_grad():
        tokens, new = prompt, []
        logits = model(prompt, cache)  # (B, P, vocab)
        for step in range(max_new_tokens):
            token = sample_next(logits[:, -1], temperature, top_k, top_p, generator)  # (B,)
            new.append(token)
            tokens = torch.cat([tokens, token[:, None]], dim=1)
            if step + 1 < max_new_tokens:
                logits = model(token[:, None], cache)
        return torch.stack(new, dim=1)
