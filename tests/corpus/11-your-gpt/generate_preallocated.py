# Correct: the output preallocated and filled column by column, under torch.inference_mode.
# expect: full
# %% cell: generate
def generate(model, prompt, max_new_tokens, temperature=1.0, top_k=None, top_p=None, generator=None,
             cache=None):
    with torch.inference_mode():
        B, P = prompt.shape
        out = torch.empty(B, P + max_new_tokens, dtype=torch.long, device=prompt.device)
        out[:, :P] = prompt
        logits = model(prompt) if cache is None else model(prompt, cache)
        for t in range(P, P + max_new_tokens):
            out[:, t] = sample_next(logits[:, -1, :], temperature, top_k, top_p, generator)
            if cache is None:
                logits = model(out[:, :t + 1])
            else:
                logits = model(out[:, t:t + 1], cache)
        return out[:, P:]
