# Correct but unusual: the masks merged into one float mask per attention, per head, as
# the source text's code does (repeat over heads, -inf where masked).
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
        self.dropout = nn.Dropout(dropout)

    def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None):
        B, T, S = tgt.shape[0], tgt.shape[1], memory.shape[1]
        H = self.self_attn.num_heads

        def merged(attn_mask, pad, L, K):
            m = torch.zeros(B, L, K, dtype=torch.bool, device=tgt.device)
            if attn_mask is not None:
                m = m | attn_mask[None]
            if pad is not None:
                m = m | pad[:, None, :]
            f = torch.zeros(B, L, K, dtype=tgt.dtype, device=tgt.device).masked_fill(m, float("-inf"))
            return f.repeat_interleave(H, dim=0)  # (B * H, L, K)

        a = self.self_attn(tgt, tgt, tgt, attn_mask=merged(tgt_mask, tgt_key_padding_mask, T, T))[0]
        x = self.norm1(tgt + self.dropout(a))
        c = self.multihead_attn(x, memory, memory, attn_mask=merged(memory_mask, memory_key_padding_mask, T, S))[0]
        x = self.norm2(x + self.dropout(c))
        return self.norm3(x + self.dropout(self.linear2(self.dropout(torch.relu(self.linear1(x))))))
