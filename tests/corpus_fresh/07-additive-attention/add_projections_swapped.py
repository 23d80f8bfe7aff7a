# Projects the query with w_k and the key with w_q.
# expect: partial
# graded: AdditiveAttention
# locus: w_q|w_k|projections are swapped|query with w_k
# %% cell: additive_attention
class AdditiveAttention(nn.Module):
    """Bahdanau's additive attention: scores v . tanh(W_q q + W_k k), a softmax over the keys.

    query: (B, L, query_size); key: (B, S, key_size); value: (B, S, Dv)
    key_padding_mask: None or (B, S) bool, True at padding
    returns (output, weights): (B, L, Dv), (B, L, S); padded keys get weight exactly 0
    """

    def __init__(self, query_size, key_size, hidden_size):
        super().__init__()
        self.w_q = nn.Linear(query_size, hidden_size, bias=False)
        self.w_k = nn.Linear(key_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query, key, value, key_padding_mask=None):
        features = self.w_k(query).unsqueeze(2) + self.w_q(key).unsqueeze(1)  # (B, L, S, h)
        scores = self.v(torch.tanh(features)).squeeze(-1)  # (B, L, S)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask.unsqueeze(1), float("-inf"))  # (B, 1, S)
        weights = torch.softmax(scores, dim=-1)  # (B, L, S), padded keys exactly 0
        return weights @ value, weights  # (B, L, Dv), (B, L, S)
