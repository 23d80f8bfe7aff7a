# Reads the mask as True = may attend (the F.scaled_dot_product_attention convention).
# expect: partial
# hint: mask is inverted
# %% cell: additive_attention
class AdditiveAttention(nn.Module):
    def __init__(self, query_size, key_size, hidden_size):
        super().__init__()
        self.w_q = nn.Linear(query_size, hidden_size, bias=False)
        self.w_k = nn.Linear(key_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query, key, value, key_padding_mask=None):
        scores = self.v(torch.tanh(self.w_q(query)[:, :, None] + self.w_k(key)[:, None])).squeeze(-1)
        if key_padding_mask is not None:
            scores = scores.masked_fill(~key_padding_mask[:, None], float("-inf"))
        weights = scores.softmax(-1)
        return weights @ value, weights
