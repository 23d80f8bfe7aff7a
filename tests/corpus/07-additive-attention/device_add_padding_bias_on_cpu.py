# Right values, but the padding becomes an additive bias made with torch.zeros(B, S) and no device=:
# on a GPU the padded cases crash (a CPU tensor filled where a cuda mask is True).
# expect: partial
# hint: On a GPU this crashes
# %% cell: additive_attention
class AdditiveAttention(nn.Module):
    def __init__(self, query_size, key_size, hidden_size):
        super().__init__()
        self.w_q = nn.Linear(query_size, hidden_size, bias=False)
        self.w_k = nn.Linear(key_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query, key, value, key_padding_mask=None):
        scores = self.v(torch.tanh(self.w_q(query)[:, :, None] + self.w_k(key)[:, None])).squeeze(-1)  # (B, L, S)
        if key_padding_mask is not None:
            B, S = key_padding_mask.shape
            bias = torch.zeros(B, S, dtype=scores.dtype).masked_fill(key_padding_mask, float("-inf"))
            scores = scores + bias[:, None, :]
        weights = scores.softmax(-1)
        return weights @ value, weights
