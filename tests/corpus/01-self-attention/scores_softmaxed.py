# Returns the attention weights instead of the raw scores.
# expect: partial
# hint: before any softmax
# %% cell: attention_scores
def attention_scores(x):
    return torch.softmax(x @ x.transpose(-2, -1), dim=-1)
