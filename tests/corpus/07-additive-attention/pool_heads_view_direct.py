# Splits the keys and values into heads with one view to (B, H, D, d), no transpose: each
# head's rows mix time steps.
# expect: partial
# hint: heads mix the time steps
# %% cell: lstm_attention_pooling
class LSTMAttentionPooling(nn.Module):
    def __init__(self, hidden_size, num_heads=1, score="dot"):
        super().__init__()
        self.num_heads, self.head_dim, self.score = num_heads, hidden_size // num_heads, score
        self.w_q = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_k = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_v = nn.Linear(hidden_size, hidden_size, bias=False)
        self.w_o = nn.Linear(hidden_size, hidden_size, bias=False)
        if score == "additive":
            self.v = nn.Parameter(torch.zeros(num_heads, self.head_dim))

    def forward(self, outputs, h_n, key_padding_mask=None):
        B, D, E = outputs.shape
        H, d = self.num_heads, self.head_dim
        q = self.w_q(h_n[-1]).view(B, H, 1, d)
        k = self.w_k(outputs).view(B, H, D, d)
        v = self.w_v(outputs).view(B, H, D, d)
        if self.score == "dot":
            scores = (q @ k.transpose(-2, -1)).squeeze(2) / math.sqrt(d)  # (B, H, D)
        else:
            scores = (torch.tanh(q + k) * self.v.view(1, H, 1, d)).sum(-1)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask.view(B, 1, D), float("-inf"))
        weights = scores.softmax(dim=-1)
        heads = (weights.unsqueeze(2) @ v).squeeze(2)  # (B, H, d)
        return self.w_o(heads.reshape(B, E)), weights
