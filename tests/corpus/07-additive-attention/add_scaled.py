# Scales the additive scores by 1/sqrt(hidden_size), as if they were dot products.
# expect: partial
# hint: no 1/sqrt(d) scaling
# %% cell: additive_attention
class AdditiveAttention(nn.Module):
    def __init__(self, query_size, key_size, hidden_size):
        super().__init__()
        self.w_q = nn.Linear(query_size, hidden_size, bias=False)
        self.w_k = nn.Linear(key_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query, key, value, key_padding_mask=None):
        scores = self.v(torch.tanh(self.w_q(query)[:, :, None] + self.w_k(key)[:, None])).squeeze(-1)
        scores = scores / math.sqrt(self.v.in_features)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None], float("-inf"))
        weights = scores.softmax(-1)
        return weights @ value, weights
