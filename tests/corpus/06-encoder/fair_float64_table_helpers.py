# Correct: LayerNorm over the flattened normalised dims, by sums divided by their count; the positional encoding as a table of Python floats (math.sin,
# math.cos, a list comprehension) made into a float32 tensor; FeedForward with F.relu in place;
# EncoderLayer with a helper method for "residual, dropout, norm" and masks passed on; Encoder
# indexing its nn.ModuleList and passing the masks by position. A scratch cell compares the
# layer with nn.TransformerEncoderLayer. Full marks.
# expect: full
# %% cell: layer_norm
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape, eps=1e-5):
        super().__init__()
        self.normalized_shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.weight = nn.Parameter(torch.ones(*self.normalized_shape))
        self.bias = nn.Parameter(torch.zeros(*self.normalized_shape))
        self.eps = eps

    def forward(self, x):
        k = len(self.normalized_shape)
        flat = x.flatten(start_dim=x.dim() - k)  # (..., n)
        n = flat.shape[-1]
        mean = flat.sum(-1, keepdim=True) / n
        centred = flat - mean
        var = (centred * centred).sum(-1, keepdim=True) / n
        out = centred / torch.sqrt(var + self.eps)
        return out.view(x.shape) * self.weight + self.bias
# %% cell: positional_encoding
def positional_encoding(max_len, d_model):
    def angle(pos, i):
        return pos / 10000 ** (2 * (i // 2) / d_model)

    table = [[math.sin(angle(pos, i)) if i % 2 == 0 else math.cos(angle(pos, i)) for i in range(d_model)]
             for pos in range(max_len)]
    return torch.tensor(table, dtype=torch.float32)
# %% cell: feed_forward
class FeedForward(nn.Module):
    def __init__(self, d_model, dim_feedforward, dropout=0.1):
        super().__init__()
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(p=dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model)

    def forward(self, x):
        hidden = F.relu(self.linear1(x), inplace=True)
        return self.linear2(self.dropout(hidden))
# %% cell: encoder_layer
class EncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def add_and_norm(self, x, sublayer_out, dropout, norm):
        return norm(x + dropout(sublayer_out))

    def feed_forward(self, x):
        return self.linear2(self.dropout(F.relu(self.linear1(x))))

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        attn_out, _ = self.self_attn(src, src, src, key_padding_mask=src_key_padding_mask, need_weights=False,
                                     attn_mask=src_mask)
        x = self.add_and_norm(src, attn_out, self.dropout1, self.norm1)
        return self.add_and_norm(x, self.feed_forward(x), self.dropout2, self.norm2)
# %% cell: encoder
class Encoder(nn.Module):
    def __init__(self, layer, num_layers):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for i in range(num_layers)])

    def forward(self, src, mask=None, src_key_padding_mask=None):
        out = src
        for i in range(len(self.layers)):
            out = self.layers[i](out, mask, src_key_padding_mask)
        return out
# %% new cell after: test_encoder_layer
torch.manual_seed(0)
reference = nn.TransformerEncoderLayer(16, 4, 32, 0.0, batch_first=True).eval()
mine = EncoderLayer(16, 4, 32, 0.0).eval()
mine.load_state_dict(reference.state_dict())
src = torch.randn(2, 5, 16)
print("same as PyTorch:", torch.allclose(mine(src), reference(src), atol=1e-5))
