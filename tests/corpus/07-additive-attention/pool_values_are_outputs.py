# Weights the LSTM outputs themselves ("the values are the hidden states"), never w_v.
# expect: partial
# hint: values are the LSTM outputs themselves
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
            self.v = nn.Parameter(torch.randn(num_heads, self.head_dim))

    def forward(self, outputs, h_n, key_padding_mask=None):
        B, D, E = outputs.shape
        H, d = self.num_heads, self.head_dim
        query = self.w_q(h_n[-1]).view(B, H, 1, d)
        keys = self.w_k(outputs).view(B, D, H, d).transpose(1, 2)
        values = outputs.view(B, D, H, d).transpose(1, 2)  # (B, H, D, d)
        if self.score == "dot":
            scores = (keys * query).sum(-1) / math.sqrt(d)
        else:
            scores = (torch.tanh(query + keys) * self.v[:, None, :]).sum(-1)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, :], float("-inf"))
        weights = scores.softmax(-1)
        return self.w_o((weights.unsqueeze(-1) * values).sum(-2).reshape(B, E)), weights
