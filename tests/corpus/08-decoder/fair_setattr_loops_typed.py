# Correct, typed: DecoderLayer makes norm1..norm3 and dropout1..dropout3 in a loop with
# setattr(self, f"norm{i}", ...) and reads them back with getattr(self, ...) (a name built at
# run time, on self: allowed); Decoder passes the masks as a dictionary of keyword arguments;
# Transformer keeps its sizes and checks them with an assert; shift_right with F.pad; greedy
# decoding under @torch.no_grad(), putting the model in eval mode and back. Full marks.
# expect: full
# %% cell: decoder_layer
from __future__ import annotations

from typing import Optional


class DecoderLayer(nn.Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.dropout = nn.Dropout(dropout)
        for i in (1, 2, 3):
            setattr(self, f"norm{i}", nn.LayerNorm(d_model))
            setattr(self, f"dropout{i}", nn.Dropout(dropout))

    def sublayer(self, i: int, x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return getattr(self, f"norm{i}")(x + getattr(self, f"dropout{i}")(out))

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor, tgt_mask: Optional[torch.Tensor] = None,
                memory_mask: Optional[torch.Tensor] = None, tgt_key_padding_mask: Optional[torch.Tensor] = None,
                memory_key_padding_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
        x = self.sublayer(1, tgt, self.self_attn(tgt, tgt, tgt, attn_mask=tgt_mask,
                                                 key_padding_mask=tgt_key_padding_mask, need_weights=False)[0])
        x = self.sublayer(2, x, self.multihead_attn(x, memory, memory, attn_mask=memory_mask,
                                                    key_padding_mask=memory_key_padding_mask,
                                                    need_weights=False)[0])
        return self.sublayer(3, x, self.linear2(self.dropout(F.relu(self.linear1(x)))))
# %% cell: decoder
from __future__ import annotations


class Decoder(nn.Module):
    def __init__(self, layer: nn.Module, num_layers: int, norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(num_layers)])
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        masks = dict(tgt_mask=tgt_mask, memory_mask=memory_mask, tgt_key_padding_mask=tgt_key_padding_mask,
                     memory_key_padding_mask=memory_key_padding_mask)
        x = tgt
        for layer in self.layers:
            x = layer(x, memory, **masks)
        return x if self.norm is None else self.norm(x)
# %% cell: transformer
from __future__ import annotations


class Transformer(nn.Module):
    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6,
                 num_decoder_layers: int = 6, dim_feedforward: int = 2048, dropout: float = 0.1) -> None:
        super().__init__()
        self.d_model, self.nhead = d_model, nhead
        encoder_layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=nhead, dim_feedforward=dim_feedforward,
                                                   dropout=dropout, batch_first=True)
        self.encoder = nn.TransformerEncoder(encoder_layer, num_layers=num_encoder_layers,
                                             norm=nn.LayerNorm(d_model), enable_nested_tensor=False)
        self.decoder = Decoder(DecoderLayer(d_model, nhead, dim_feedforward, dropout), num_decoder_layers,
                               norm=nn.LayerNorm(d_model))

    def encode(self, src, src_mask=None, src_key_padding_mask=None):
        assert src.size(-1) == self.d_model, "src must be (B, S, d_model)"
        return self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask)

    def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None,
                tgt_key_padding_mask=None, memory_key_padding_mask=None):
        memory = self.encode(src, src_mask, src_key_padding_mask)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask)
# %% cell: shift_right
from __future__ import annotations


def shift_right(tgt: torch.Tensor, start_token: int) -> torch.Tensor:
    return F.pad(tgt[:, :-1], (1, 0), value=start_token)  # start_token, then all but the last
# %% cell: greedy_decode
from __future__ import annotations


@torch.no_grad()
def greedy_decode(model: nn.Module, src: torch.Tensor, start_token: int, max_len: int) -> torch.Tensor:
    was_training = model.training
    model.eval()
    tokens = torch.full((src.size(0), 1), start_token, dtype=src.dtype, device=src.device)
    for step in range(max_len):
        logits = model(src, tokens)  # (B, t, vocab)
        next_token = logits[:, -1].argmax(-1, keepdim=True).to(tokens.dtype)  # (B, 1)
        tokens = torch.cat((tokens, next_token), dim=-1)
    model.train(was_training)
    return tokens[:, 1:]
