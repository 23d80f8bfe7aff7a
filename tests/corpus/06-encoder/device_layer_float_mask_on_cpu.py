# Right values, but the merged float mask is made with torch.zeros(B, L, L, dtype=src.dtype) and no
# device=: on a GPU the cases with a mask crash (a CPU tensor filled where a cuda mask is True).
# expect: partial
# hint: On a GPU this crashes
# %% cell: encoder_layer
class EncoderLayer(nn.Module):
    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1):
        super().__init__()
        self.nhead = nhead
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=True)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout1 = nn.Dropout(dropout)
        self.dropout2 = nn.Dropout(dropout)

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        B, L, _ = src.shape
        mask = None
        if src_mask is not None or src_key_padding_mask is not None:
            mask = torch.zeros(B, L, L, dtype=src.dtype)
            if src_mask is not None:
                mask = mask.masked_fill(src_mask, float("-inf"))
            if src_key_padding_mask is not None:
                mask = mask.masked_fill(src_key_padding_mask[:, None, :], float("-inf"))
            mask = mask.repeat_interleave(self.nhead, dim=0)  # (B * nhead, L, L)
        attn = self.self_attn(src, src, src, attn_mask=mask, need_weights=False)[0]
        h = self.norm1(src + self.dropout1(attn))
        return self.norm2(h + self.dropout2(self.linear2(self.dropout(torch.relu(self.linear1(h))))))
