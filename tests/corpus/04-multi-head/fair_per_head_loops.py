# Correct: heads split by torch.split and stacked, merged by unbind and cat; MultiHeadAttention
# loops over its heads with Python lists and torch.stack, the bias chunks handled with a
# conditional expression; counts from a dictionary of shapes and math.prod, multiply-adds from
# a helper that prices one matrix product. Prints in the scratch cell. Full marks.
# expect: full
# %% cell: split_heads
def split_heads(x, num_heads):
    head_dim = x.shape[-1] // num_heads
    return torch.stack(x.split(head_dim, dim=-1), dim=1)  # (B, H, L, E/H)
# %% cell: merge_heads
def merge_heads(x):
    return torch.cat(x.unbind(dim=1), dim=-1)  # (B, L, H·D), head 0 first
# %% cell: MultiHeadAttention
class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.in_proj_weight = nn.Parameter(nn.init.xavier_uniform_(torch.empty(3 * embed_dim, embed_dim)))
        if bias:
            self.in_proj_bias = nn.Parameter(torch.zeros(3 * embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None, need_weights=True,
                average_attn_weights=True):
        weights_qkv = self.in_proj_weight.chunk(3, dim=0)
        biases_qkv = self.in_proj_bias.chunk(3) if self.in_proj_bias is not None else [None] * 3
        q, k, v = [F.linear(t, w, b) for t, w, b in zip((query, key, value), weights_qkv, biases_qkv)]
        heads, all_weights = [], []
        d = self.head_dim
        for h in range(self.num_heads):
            qh, kh, vh = q[..., h * d:(h + 1) * d], k[..., h * d:(h + 1) * d], v[..., h * d:(h + 1) * d]
            scores = qh @ kh.transpose(1, 2) / math.sqrt(d)  # (B, L, S)
            w = torch.softmax(scores, dim=-1)
            heads.append(w @ vh)
            all_weights.append(w)
        out = self.out_proj(torch.cat(heads, dim=-1))
        if not need_weights:
            return out, None
        weights = torch.stack(all_weights, dim=1)  # (B, H, L, S)
        return out, weights.mean(1) if average_attn_weights else weights
# %% cell: mha_parameter_count
def mha_parameter_count(embed_dim, num_heads, bias=True):
    shapes = {"in_proj_weight": (3 * embed_dim, embed_dim), "out_proj.weight": (embed_dim, embed_dim)}
    if bias:
        shapes.update({"in_proj_bias": (3 * embed_dim,), "out_proj.bias": (embed_dim,)})
    return sum(math.prod(shape) for shape in shapes.values())
# %% cell: mha_multiply_adds
def matmul_cost(m, k, n):
    """Multiply-adds of an (m × k) @ (k × n) product."""
    return m * k * n


def mha_multiply_adds(n, d, num_heads):
    head_dim = d // num_heads
    projections = 3 * matmul_cost(n, d, d) + matmul_cost(n, d, d)
    per_head = matmul_cost(n, head_dim, n) + matmul_cost(n, n, head_dim)
    return projections + num_heads * per_head
# %% new cell after: test_parameter_count
layer = MultiHeadAttention(8, 2)
print(sum(p.numel() for p in layer.parameters()), mha_parameter_count(8, 2))
print([name for name, _ in layer.named_parameters()])
