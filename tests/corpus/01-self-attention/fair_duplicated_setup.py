# Correct; the setup cell was pasted twice more (same source and metadata, new cell ids): once
# right below itself, once at the end. (Before issue 11: 0 for the whole assignment.)
# expect: full
# %% copy of: setup after: setup
# %% copy of: setup after: toy_sentence
# %% cell: attention_scores
def attention_scores(x):
    return torch.einsum("bld,bmd->blm", x, x)  # (B, L, L)
