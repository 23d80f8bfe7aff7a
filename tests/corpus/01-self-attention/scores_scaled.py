# Scales the scores by 1/sqrt(D) already in attention_scores.
# expect: partial
# hint: the scaling belongs to simple_self_attention
# %% cell: attention_scores
def attention_scores(x):
    return x @ x.transpose(-2, -1) / math.sqrt(x.size(-1))
