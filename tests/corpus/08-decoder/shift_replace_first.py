# Off by one: overwrites the first token instead of shifting.
# expect: partial
# hint: replaced the first token
# %% cell: shift_right
def shift_right(tgt, start_token):
    out = tgt.clone()
    out[:, 0] = start_token
    return out
