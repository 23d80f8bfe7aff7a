# Takes the argmax over dim 0 (the batch) instead of the vocabulary.
# expect: partial
# graded: greedy_decode
# locus: dim=-1|over the vocabulary|argmax over|argmax(dim
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    """Generate max_len tokens, one at a time, each the argmax given the tokens before it.

    model(src (B, S), tgt_in (B, t)) -> logits (B, t, vocab); returns (B, max_len) token ids
    """
    generated = torch.full((src.shape[0], 1), start_token, dtype=src.dtype, device=src.device)  # (B, 1)
    with torch.inference_mode():  # no gradients needed: nothing is trained here
        for _ in range(max_len):
            scores = model(src, generated)[:, -1, :]  # (B, vocab): the scores of the next token
            best = scores.argmax(dim=0).to(src.dtype)  # (B,)
            generated = torch.cat([generated, best[:, None]], dim=1)  # feed the guess back
    return generated[:, 1:]  # (B, max_len), without the start token
