# Returns the allowed positions (lower triangle with the diagonal): F.scaled_dot_product_attention's
# convention instead of True = not allowed.
# expect: partial
# hint: True where attention is allowed
# %% cell: causal_mask
def causal_mask(size):
    return torch.tril(torch.ones(size, size, dtype=torch.bool))
