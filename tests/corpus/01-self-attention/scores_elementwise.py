# Multiplies elementwise instead of taking dot products.
# expect: partial
# hint: elementwise product
# %% cell: attention_scores
def attention_scores(x):
    return x * x
