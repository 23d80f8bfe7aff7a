# Collects the results in a dict and returns its values in insertion order: weights first.
# expect: partial
# hint: returns (weights, output)
# %% cell: additive_attention
class AdditiveAttention(nn.Module):
    def __init__(self, query_size, key_size, hidden_size):
        super().__init__()
        self.w_q = nn.Linear(query_size, hidden_size, bias=False)
        self.w_k = nn.Linear(key_size, hidden_size, bias=False)
        self.v = nn.Linear(hidden_size, 1, bias=False)

    def forward(self, query, key, value, key_padding_mask=None):
        results = {}
        hidden = torch.tanh(self.w_q(query).unsqueeze(-2) + self.w_k(key).unsqueeze(-3))  # (B, L, S, h)
        scores = self.v(hidden).squeeze(-1)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask.unsqueeze(-2), float("-inf"))
        results["weights"] = F.softmax(scores, dim=-1)
        results["output"] = results["weights"] @ value
        return tuple(results.values())
