# Wraps nn.Transformer itself: no points for it (nor for training).
# expect: partial
# hint: nn.Transformer
# %% cell: transformer
class Transformer(nn.Transformer):
    def __init__(self, d_model=512, nhead=8, num_encoder_layers=6, num_decoder_layers=6,
                 dim_feedforward=2048, dropout=0.1):
        super().__init__(d_model, nhead, num_encoder_layers, num_decoder_layers, dim_feedforward, dropout,
                         batch_first=True)
