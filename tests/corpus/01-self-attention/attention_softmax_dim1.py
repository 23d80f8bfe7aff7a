# Takes the softmax over dim=1 (the queries): the columns sum to 1, not the rows.
# expect: partial
# hint: normalised over the wrong axis
# %% cell: simple_self_attention
def simple_self_attention(x):
    weights = torch.softmax(x @ x.transpose(1, 2) / math.sqrt(x.shape[2]), dim=1)
    return weights @ x, weights
