# Reshapes the keys and values straight to (B, H, D, d) and works with einsum: every head
# reads a block of rows that mixes time steps.
# expect: partial
# hint: heads mix the time steps
# %% cell: lstm_attention_pooling
class LSTMAttentionPooling(nn.Module):
    def __init__(self, hidden_size, num_heads=1, score="dot"):
        super().__init__()
        self.num_heads, self.score = num_heads, score
        self.head_dim = hidden_size // num_heads
        self.w_q = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_k = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_v = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_o = nn.Linear(hidden_size, hidden_size, bias=False)
        if score == "additive":
            self.v = nn.Parameter(torch.randn(num_heads, self.head_dim))

    def forward(self, outputs, h_n, key_padding_mask=None):
        B, D, E = outputs.shape
        H, d = self.num_heads, self.head_dim
        q = self.w_q(h_n[-1]).reshape(B, H, 1, d)
        k = self.w_k(outputs).reshape(B, H, D, d)
        v = self.w_v(outputs).reshape(B, H, D, d)
        if self.score == "dot":
            s = torch.einsum("bhqd,bhkd->bhk", q, k) / d ** 0.5
        else:
            s = torch.einsum("bhkd,hd->bhk", torch.tanh(q + k), self.v)
        if key_padding_mask is not None:
            s = s.masked_fill(key_padding_mask[:, None], float("-inf"))
        w = s.softmax(-1)
        pooled = torch.einsum("bhk,bhkd->bhd", w, v).reshape(B, E)
        return self.w_o(pooled), w
