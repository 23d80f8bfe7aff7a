# Hostile: a class attribute holds nn.MultiheadAttention; the instance shares its parameters
# but is kept out of the module tree, and runs with torch function handling off.
# cli only: the in-kernel detectors are bypassed, so only the grader's scan catches it
# expect: partial
# hint: calls nn.MultiheadAttention
# %% cell: MultiHeadAttention
class MultiHeadAttention(nn.Module):
    engine = nn.MultiheadAttention

    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        inner = self.engine(embed_dim, num_heads, bias=bias, batch_first=True)
        self.num_heads, self.in_proj_weight, self.out_proj = num_heads, inner.in_proj_weight, inner.out_proj
        if bias:
            self.in_proj_bias = inner.in_proj_bias
        else:
            self.register_parameter("in_proj_bias", None)
        object.__setattr__(self, "_inner", inner)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None,
                need_weights=True, average_attn_weights=True):
        with torch._C.DisableTorchFunction():
            return self._inner(query, key, value, key_padding_mask=key_padding_mask, attn_mask=attn_mask,
                               need_weights=need_weights, average_attn_weights=average_attn_weights)
