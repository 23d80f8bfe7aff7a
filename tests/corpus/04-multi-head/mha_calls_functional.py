# Calls F.multi_head_attention_forward under an alias, with the module's own
# parameters: forbidden, so MultiHeadAttention earns no points.
# expect: partial
# hint: earns no points
# %% cell: MultiHeadAttention
from torch.nn.functional import multi_head_attention_forward as mha_forward


class MultiHeadAttention(nn.Module):
    """Multi-head attention with nn.MultiheadAttention's parameters and masks (batch first).

    in_proj_weight (3E, E), in_proj_bias (3E,) or None, out_proj = nn.Linear(E, E, bias=bias)
    """

    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        assert embed_dim % num_heads == 0, "embed_dim must be divisible by num_heads"
        self.embed_dim = embed_dim
        self.num_heads = num_heads
        self.head_dim = embed_dim // num_heads
        # W_q, W_k, W_v stacked by rows, each (E, E): all the heads of one projection at once
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        nn.init.xavier_uniform_(self.in_proj_weight)
        if bias:
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)  # no bias, and no key in state_dict
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None,
                need_weights=True, average_attn_weights=True):
        out, weights = mha_forward(
            query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1), self.embed_dim, self.num_heads,
            self.in_proj_weight, self.in_proj_bias, None, None, False, 0.0, self.out_proj.weight,
            self.out_proj.bias, training=False, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, average_attn_weights=average_attn_weights)
        return out.transpose(0, 1), weights
