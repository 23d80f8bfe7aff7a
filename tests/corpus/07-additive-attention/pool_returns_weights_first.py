# Returns the attention weights first, then the pooled vector.
# expect: partial
# hint: returns (weights, pooled)
# %% cell: lstm_attention_pooling
class LSTMAttentionPooling(nn.Module):
    def __init__(self, hidden_size, num_heads=1, score="dot"):
        super().__init__()
        self.h, self.d, self.score = num_heads, hidden_size // num_heads, score
        self.w_q = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_k = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_v = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_o = nn.Linear(hidden_size, hidden_size, bias=False)
        if score == "additive":
            self.v = nn.Parameter(torch.randn(num_heads, self.d))

    def forward(self, outputs, h_n, key_padding_mask=None):
        B, D, E = outputs.shape
        q = self.w_q(h_n[-1]).view(B, 1, self.h, self.d)  # (B, 1, H, d)
        k = self.w_k(outputs).view(B, D, self.h, self.d)  # (B, D, H, d)
        v = self.w_v(outputs).view(B, D, self.h, self.d)
        if self.score == "dot":
            s = (q * k).sum(-1) / math.sqrt(self.d)  # (B, D, H)
        else:
            s = (torch.tanh(q + k) * self.v).sum(-1)
        s = s.transpose(1, 2)  # (B, H, D)
        if key_padding_mask is not None:
            s = s.masked_fill(key_padding_mask.unsqueeze(1), float("-inf"))
        a = torch.softmax(s, dim=-1)
        z = torch.einsum("bhd,bdhe->bhe", a, v).reshape(B, E)
        return a, self.w_o(z)
