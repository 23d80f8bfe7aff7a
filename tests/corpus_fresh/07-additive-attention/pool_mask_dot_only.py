# Masks the padding only for the dot score: the additive score attends to padded steps.
# expect: partial
# graded: LSTMAttentionPooling
# locus: additive|padding positions|padded steps|key_padding_mask
# %% cell: lstm_attention_pooling
class LSTMAttentionPooling(nn.Module):
    """Attention over LSTM outputs with the last hidden state as the query, H heads.

    outputs: (B, D, E); h_n: (num_layers, B, E); key_padding_mask: None or (B, D) bool, True at padding
    score: "dot" (scaled by 1/sqrt(E / H)) or "additive" (v_h . tanh(query_h + key_h))
    returns (pooled, weights): (B, E), (B, H, D); padded steps get weight exactly 0
    """

    def __init__(self, hidden_size, num_heads=1, score="dot"):
        super().__init__()
        if hidden_size % num_heads or score not in ("dot", "additive"):
            raise ValueError("hidden_size must be a multiple of num_heads; score 'dot' or 'additive'")
        self.num_heads, self.head_dim, self.score = num_heads, hidden_size // num_heads, score
        self.w_q = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_k = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_v = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_o = nn.Linear(hidden_size, hidden_size, bias=False)
        if score == "additive":
            self.v = nn.Parameter(torch.randn(num_heads, self.head_dim) / math.sqrt(self.head_dim))

    def forward(self, outputs, h_n, key_padding_mask=None):
        B, D, E = outputs.size()
        H, d = self.num_heads, self.head_dim
        query = self.w_q(h_n[-1]).view(B, H, 1, d)  # (B, H, 1, d): the top layer's last state
        keys = self.w_k(outputs).view(B, D, H, d).transpose(1, 2)  # (B, H, D, d)
        values = self.w_v(outputs).view(B, D, H, d).transpose(1, 2)  # (B, H, D, d)
        if self.score == "dot":
            scores = (keys * query).sum(-1) / math.sqrt(d)  # (B, H, D)
        else:
            scores = (torch.tanh(query + keys) * self.v.unsqueeze(1)).sum(-1)  # v (H, 1, d) -> (B, H, D)
        if key_padding_mask is not None and self.score == "dot":
            scores = scores.masked_fill(key_padding_mask.unsqueeze(1), float("-inf"))  # (B, 1, D)
        weights = torch.softmax(scores, dim=-1)  # (B, H, D)
        heads = (weights.unsqueeze(-1) * values).sum(-2)  # (B, H, d)
        return self.w_o(heads.reshape(B, E)), weights  # concatenated heads (B, E) through W_O
