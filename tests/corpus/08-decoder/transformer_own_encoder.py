# Correct: the encoder is built from its own post-norm layer class (chapter 06) with
# PyTorch's names, and a small Encoder with a final norm.
# expect: full
# %% cell: transformer
class _EncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward, dropout):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1, self.norm2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, mask=None, pad=None):
        x = self.norm1(x + self.drop(self.self_attn(x, x, x, attn_mask=mask, key_padding_mask=pad)[0]))
        return self.norm2(x + self.drop(self.linear2(self.drop(torch.relu(self.linear1(x))))))


class _Encoder(nn.Module):
    def __init__(self, layer, n, d_model):
        super().__init__()
        self.layers = nn.ModuleList(copy.deepcopy(layer) for _ in range(n))
        self.norm = nn.LayerNorm(d_model)

    def forward(self, x, mask=None, pad=None):
        for layer in self.layers:
            x = layer(x, mask, pad)
        return self.norm(x)


class Transformer(nn.Module):
    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.encoder = _Encoder(_EncoderLayer(d_model, nhead, dim_feedforward, dropout), num_encoder_layers, d_model)
        self.decoder = Decoder(DecoderLayer(d_model, nhead, dim_feedforward, dropout), num_decoder_layers,
                               nn.LayerNorm(d_model))

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None):
        memory = self.encoder(src, src_mask, src_key_padding_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
