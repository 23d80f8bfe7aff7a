# Views a float key_padding_mask as (B, 1, S), which lines up with the heads, not the sentences.
# expect: partial
# graded: MultiHeadAttention
# locus: (B, 1, 1, S)|(B, 1, S)|key_padding_mask
# %% cell: MultiHeadAttention
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
        """query: (B, L, E); key, value: (B, S, E)
        key_padding_mask: None or (B, S), bool (True = padding) or float (added)
        attn_mask: None or (L, S) or (B·H, L, S), bool (True = may not attend) or float (added)
        returns (attn_output, attn_weights): (B, L, E), and (B, L, S) averaged over the heads,
        (B, H, L, S) when average_attn_weights=False, None when need_weights=False
        """
        B, L, E = query.size()
        S, H, D = key.size(1), self.num_heads, self.head_dim
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)  # (E, E) each
        b_q, b_k, b_v = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        q = F.linear(query, w_q, b_q).view(B, L, H, D).transpose(1, 2)  # (B, H, L, D)
        k = F.linear(key, w_k, b_k).view(B, S, H, D).transpose(1, 2)  # (B, H, S, D)
        v = F.linear(value, w_v, b_v).view(B, S, H, D).transpose(1, 2)  # (B, H, S, D)

        scores = q @ k.transpose(-2, -1) / math.sqrt(D)  # (B, H, L, S)
        given = [m for m in (key_padding_mask, attn_mask) if m is not None]
        if given and given[0].dtype == torch.bool:  # True = may not attend: one merged mask
            scores = scores.masked_fill(merge_masks(key_padding_mask, attn_mask, H), float("-inf"))
        elif given:  # float masks are added, lined up as merge_masks lines up boolean ones
            if attn_mask is not None:  # (L, S), or (B·H, L, S) -> (B, H, L, S)
                scores = scores + (attn_mask.view(B, H, L, S) if attn_mask.dim() == 3 else attn_mask)
            if key_padding_mask is not None:  # (B, S) -> (B, 1, 1, S): every head and query
                scores = scores + key_padding_mask.view(B, 1, S)
        weights = scores.softmax(dim=-1)  # (B, H, L, S)

        heads = weights @ v  # (B, H, L, D)
        attn_output = self.out_proj(heads.transpose(1, 2).reshape(B, L, E))  # merge the heads: (B, L, E)
        if not need_weights:
            return attn_output, None
        if average_attn_weights:
            weights = weights.mean(dim=1)  # (B, L, S)
        return attn_output, weights
