# Puts each new token in front of the sequence instead of appending it.
# expect: partial
# graded: greedy_decode
# locus: append|at the end|in front|order of the tokens|prepend
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    """Generate max_len tokens, one at a time, each the argmax given the tokens before it.

    model(src (B, S), tgt_in (B, t)) -> logits (B, t, vocab); returns (B, max_len) token ids
    """
    generated = torch.full((src.shape[0], 1), start_token, dtype=src.dtype, device=src.device)  # (B, 1)
    with torch.inference_mode():  # no gradients needed: nothing is trained here
        for _ in range(max_len):
            scores = model(src, generated)[:, -1, :]  # (B, vocab): the scores of the next token
            best = scores.argmax(dim=-1).to(src.dtype)  # (B,)
            generated = torch.cat([best[:, None], generated], dim=1)  # feed the guess back
    return generated[:, :-1].flip(1)  # (B, max_len), without the start token
