# Correct, in an older tutorial's style: MultiHeadAttention calls nn.Module.__init__(self) instead
# of super().__init__(), initialises its linear layers by walking self.modules(), names its class
# with type(self).__name__ in extra_repr and in its error messages; padding_mask checks its input
# the same way. Scratch cells ask IPython for help (MultiHeadAttention?) and count the module's
# linear layers with model.modules(). Full marks.
# expect: full
# %% cell: padding_mask
def padding_mask(tokens, pad_id=0):
    if not torch.is_tensor(tokens):
        raise TypeError(f"padding_mask expects a tensor of token ids, got {type(tokens).__name__}")
    return tokens == pad_id
# %% cell: MultiHeadAttention
class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        nn.Module.__init__(self)
        if embed_dim % num_heads:
            raise ValueError(f"{type(self).__name__}: embed_dim {embed_dim} is not a multiple of {num_heads}")
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        if bias:
            self.in_proj_bias = nn.Parameter(torch.empty(3 * embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        nn.init.xavier_uniform_(self.in_proj_weight)
        if self.in_proj_bias is not None:
            nn.init.zeros_(self.in_proj_bias)
        for module in self.modules():
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

    def extra_repr(self):
        return f"{type(self).__name__}(embed_dim={self.embed_dim}, num_heads={self.num_heads})"

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None, need_weights=True,
                average_attn_weights=True):
        B, L, E = query.shape
        S, H, D = key.shape[1], self.num_heads, self.head_dim
        w_q, w_k, w_v = self.in_proj_weight.chunk(3)
        b_q, b_k, b_v = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else (None, None, None)
        q = F.linear(query, w_q, b_q).view(B, L, H, D).transpose(1, 2)
        k = F.linear(key, w_k, b_k).view(B, S, H, D).transpose(1, 2)
        v = F.linear(value, w_v, b_v).view(B, S, H, D).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(D)
        for mask, shape in ((key_padding_mask, (B, 1, 1, S)), (attn_mask, None)):
            if mask is None:
                continue
            if mask.dim() == 3:
                mask = mask.view(B, H, L, S)
            elif shape is not None:
                mask = mask.view(shape)
            if mask.dtype == torch.bool:
                scores = scores.masked_fill(mask, float("-inf"))
            elif mask.is_floating_point():
                scores = scores + mask
            else:
                raise TypeError(f"{type(self).__name__}: masks are bool or float, not {mask.dtype}")
        weights = scores.softmax(dim=-1)
        out = self.out_proj((weights @ v).transpose(1, 2).reshape(B, L, E))
        if not need_weights:
            return out, None
        return out, weights.mean(dim=1) if average_attn_weights else weights
# %% new cell after: test_mha_masks
MultiHeadAttention?
model = MultiHeadAttention(8, 2)
print(model, sum(1 for m in model.modules() if isinstance(m, nn.Linear)), "linear layer(s)")
