# Normalises every token to length 1 first: cosine similarities instead of dot products.
# expect: partial
# graded: attention_scores
# locus: cosine|unit length|x.norm|norms of|length 1
# %% cell: attention_scores
def attention_scores(x):
    unit = x / x.norm(dim=-1, keepdim=True)
    return unit @ unit.transpose(-2, -1)
