# Zeroes the padded weights after the softmax: the rows no longer sum to 1.
# expect: partial
# hint: before the softmax
# %% cell: additive_attention
class AdditiveAttention(nn.Module):
    def __init__(self, query_size, key_size, hidden_size):
        super().__init__()
        self.w_q = nn.Linear(query_size, hidden_size, bias=False)
        self.w_k = nn.Linear(key_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query, key, value, key_padding_mask=None):
        scores = self.v(torch.tanh(self.w_q(query)[:, :, None] + self.w_k(key)[:, None])).squeeze(-1)
        weights = scores.softmax(-1)
        if key_padding_mask is not None:
            weights = weights * (~key_padding_mask[:, None]).to(weights.dtype)
        return weights @ value, weights
