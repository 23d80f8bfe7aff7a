# Accepts key_padding_mask but never uses it: padded keys get weight.
# expect: partial
# hint: padding positions got weight
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
        return weights @ value, weights
