# Correct: DecoderLayer with a feed-forward method, F.dropout-free nn.Dropout modules kept in
# an nn.ModuleList besides the named ones (no parameters, so the state dict is PyTorch's);
# Decoder indexing its layers in a while loop; Transformer's layers configured from a dict of
# keyword arguments; shift_right with empty_like and copy_ in place; greedy decoding in a while
# loop with .max(...).indices and a list of columns stacked at the end, printing its progress.
# A scratch cell compares DecoderLayer with nn.TransformerDecoderLayer. Full marks.
# expect: full
# %% cell: decoder_layer
class DecoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.drops = nn.ModuleList(nn.Dropout(dropout) for _ in range(4))

    def feed_forward(self, x):
        return self.linear2(self.drops[0](torch.relu(self.linear1(x))))

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        self_attended, _ = self.self_attn(query=tgt, key=tgt, value=tgt, key_padding_mask=tgt_key_padding_mask,
                                          need_weights=False, attn_mask=tgt_mask)
        x = self.norm1(tgt + self.drops[1](self_attended))
        cross, _ = self.multihead_attn(query=x, key=memory, value=memory, key_padding_mask=memory_key_padding_mask,
                                       need_weights=False, attn_mask=memory_mask)
        x = self.norm2(x + self.drops[2](cross))
        return self.norm3(x + self.drops[3](self.feed_forward(x)))
# %% cell: decoder
class Decoder(nn.Module):
    def __init__(self, layer, num_layers, norm=None):
        super().__init__()
        self.layers = nn.ModuleList()
        for _ in range(num_layers):
            self.layers.append(copy.deepcopy(layer))
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        i = 0
        while i < len(self.layers):
            tgt = self.layers[i](tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
            i += 1
        if self.norm is not None:
            tgt = self.norm(tgt)
        return tgt
# %% cell: transformer
class Transformer(nn.Module):
    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6, dim_feedforward=2048,
                 dropout=0.1):
        super().__init__()
        sizes = dict(dim_feedforward=dim_feedforward, dropout=dropout)
        self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(d_model, nhead, batch_first=True, **sizes),
                                             num_encoder_layers, nn.LayerNorm(d_model), enable_nested_tensor=False)
        self.decoder = Decoder(DecoderLayer(d_model, nhead, **sizes), num_decoder_layers, nn.LayerNorm(d_model))

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None):
        memory = self.encoder(src, src_mask, src_key_padding_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
# %% cell: shift_right
def shift_right(tgt, start_token):
    out = torch.empty_like(tgt)
    out[:, 0] = start_token
    out[:, 1:].copy_(tgt[:, :-1])
    return out
# %% cell: greedy_decode
def greedy_decode(model, src, start_token, max_len):
    columns = [torch.full((src.shape[0],), start_token, dtype=src.dtype, device=src.device)]
    while len(columns) <= max_len:
        with torch.no_grad():
            logits = model(src, torch.stack(columns, dim=1))
        columns.append(logits[:, -1, :].max(dim=-1).indices.to(src.dtype))
        if len(columns) % 10 == 0:
            print(f"generated {len(columns) - 1} of {max_len}")
    return torch.stack(columns[1:], dim=1)
# %% new cell after: test_decoder_layer
torch.manual_seed(0)
reference = nn.TransformerDecoderLayer(16, 4, 32, 0.0, batch_first=True).eval()
mine = DecoderLayer(16, 4, 32, 0.0).eval()
mine.load_state_dict(reference.state_dict())
tgt, memory = torch.randn(2, 5, 16), torch.randn(2, 7, 16)
print("same as PyTorch:", torch.allclose(mine(tgt, memory), reference(tgt, memory), atol=1e-5))
