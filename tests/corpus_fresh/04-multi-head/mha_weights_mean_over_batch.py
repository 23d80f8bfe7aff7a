# Averages the attention weights over dim 0 (the batch) instead of dim 1 (the heads).
# expect: partial
# graded: MultiHeadAttention
# locus: over the batch|dim=0|dim 0|over the heads|mean over
# %% cell: MultiHeadAttention
class MultiHeadAttention(nn.Module):
    """Multi-head attention with nn.MultiheadAttention's parameters (batch first).

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
        key_padding_mask, attn_mask: always None here (assignment 05 adds the masks)
        returns (attn_output, attn_weights): (B, L, E), and (B, L, S) averaged over the heads,
        (B, H, L, S) when average_attn_weights=False, None when need_weights=False
        """
        if key_padding_mask is not None or attn_mask is not None:
            raise NotImplementedError("masks: assignment 05 adds them to this class")
        B, L, E = query.size()
        S, H = key.size(1), self.num_heads
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)  # (E, E) each
        b_q, b_k, b_v = (None,) * 3 if self.in_proj_bias is None else self.in_proj_bias.chunk(3)
        q = split_heads(F.linear(query, w_q, b_q), H)  # (B, H, L, E/H)
        k = split_heads(F.linear(key, w_k, b_k), H)  # (B, H, S, E/H)
        v = split_heads(F.linear(value, w_v, b_v), H)  # (B, H, S, E/H)

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, L, S)
        weights = scores.softmax(dim=-1)  # (B, H, L, S)

        attn_output = self.out_proj(merge_heads(weights @ v))  # (B, H, L, E/H) -> (B, L, E)
        if not need_weights:
            return attn_output, None
        if average_attn_weights:
            weights = weights.mean(dim=0)  # (B, L, S)
        return attn_output, weights
