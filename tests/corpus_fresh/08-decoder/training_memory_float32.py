# Casts the encoder's output to float32 'for speed': a float64 model's decoder then meets float32 memory.
# expect: partial
# graded: training
# locus: float32|dtype|float64
# %% cell: transformer
class Transformer(nn.Module):
    """An encoder-decoder Transformer, as nn.Transformer(..., batch_first=True).

    src: (B, S, E); tgt: (B, T, E); masks as nn.Transformer's; returns (B, T, E)
    """

    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1):
        super().__init__()
        enc_layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward, dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(
            enc_layer, num_encoder_layers, norm=nn.LayerNorm(d_model), enable_nested_tensor=False)
        dec_layer = DecoderLayer(d_model, nhead, dim_feedforward, dropout)
        self.decoder = Decoder(dec_layer, num_decoder_layers, norm=nn.LayerNorm(d_model))

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None):
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask).float()  # (B, S, E)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask)  # (B, T, E)
