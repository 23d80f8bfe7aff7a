# Correct; the setup cell was pasted again at the end, and a cell of their own reads the checks'
# documentation with help(). (Before issue 11: 0 for the whole assignment.)
# expect: full
# %% copy of: setup after: masked_attention
# %% new cell after: setup
import attention_checks
import attention_checks.masks

help(attention_checks.masks.check_padding_mask)
print(attention_checks.__doc__)
# %% cell: causal_mask
def causal_mask(size):
    rows = torch.arange(size)[:, None]  # (size, 1)
    cols = torch.arange(size)[None, :]  # (1, size)
    return cols > rows  # (size, size), True above the diagonal: may not attend
