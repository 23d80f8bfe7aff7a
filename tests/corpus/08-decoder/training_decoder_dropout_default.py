# Passes dropout to the encoder but not to the decoder's layer, which keeps its default 0.1.
# expect: partial
# hint: first loss, before any update, already differs
# %% cell: transformer
class Transformer(nn.Module):
    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1):
        super().__init__()
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_encoder_layers, norm=nn.LayerNorm(d_model),
                                             enable_nested_tensor=False)
        self.decoder = Decoder(DecoderLayer(d_model, nhead, dim_feedforward=dim_feedforward),
                               num_layers=num_decoder_layers, norm=nn.LayerNorm(d_model))

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None):
        memory = self.encoder(src, src_mask, src_key_padding_mask)
        return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask)
