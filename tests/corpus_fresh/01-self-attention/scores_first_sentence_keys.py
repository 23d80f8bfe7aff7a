# Every sentence is compared with the tokens of the first sentence: x @ x[0].T instead of a batched product.
# expect: partial
# graded: attention_scores
# locus: first sentence|x[0]|each sentence|other sentences|batch element|sentence 0
# %% cell: attention_scores
def attention_scores(x):
    return x @ x[0].transpose(-2, -1)
