# One einsum pools the raw outputs per head: the value projection is skipped.
# expect: partial
# hint: values are the LSTM outputs themselves
# %% cell: lstm_attention_pooling
class LSTMAttentionPooling(nn.Module):
    def __init__(self, hidden_size, num_heads=1, score="dot"):
        super().__init__()
        assert hidden_size % num_heads == 0
        self.H, self.score = num_heads, score
        self.w_q = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_k = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_v = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_o = nn.Linear(hidden_size, hidden_size, bias=False)
        if score == "additive":
            self.v = nn.Parameter(torch.randn(num_heads, hidden_size // num_heads) * 0.1)

    def forward(self, outputs, h_n, key_padding_mask=None):
        B, D, E = outputs.shape
        q = self.w_q(h_n[-1]).unflatten(-1, (self.H, -1))  # (B, H, d)
        k = self.w_k(outputs).unflatten(-1, (self.H, -1))  # (B, D, H, d)
        if self.score == "dot":
            scores = torch.einsum("bhe,bdhe->bhd", q, k) / math.sqrt(q.shape[-1])
        else:
            scores = torch.einsum("bdhe,he->bhd", torch.tanh(q[:, None] + k), self.v)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, :], float("-inf"))
        weights = scores.softmax(-1)
        pooled = torch.einsum("bhd,bdhe->bhe", weights, outputs.unflatten(-1, (self.H, -1)))
        return self.w_o(pooled.flatten(1)), weights
