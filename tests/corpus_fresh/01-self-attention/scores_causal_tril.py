# Keeps only the lower triangle of the scores, as if attention_scores had to be causal.
# expect: partial
# graded: attention_scores
# locus: causal|tril|triangle|above the diagonal
# %% cell: attention_scores
def attention_scores(x):
    return (x @ x.transpose(-2, -1)).tril()
