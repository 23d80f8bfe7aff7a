# Starts from an int64 tensor whatever src's dtype: int32 sources get int64 tokens.
# expect: partial
# graded: greedy_decode
# locus: dtype|int32|int64|src.dtype
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    """Generate max_len tokens, one at a time, each the argmax given the tokens before it.

    model(src (B, S), tgt_in (B, t)) -> logits (B, t, vocab); returns (B, max_len) token ids
    """
    generated = torch.full((src.shape[0], 1), start_token, device=src.device)  # (B, 1)
    with torch.inference_mode():  # no gradients needed: nothing is trained here
        for _ in range(max_len):
            scores = model(src, generated)[:, -1, :]  # (B, vocab): the scores of the next token
            best = scores.argmax(dim=-1)  # (B,)
            generated = torch.cat([generated, best[:, None]], dim=1)  # feed the guess back
    return generated[:, 1:]  # (B, max_len), without the start token
