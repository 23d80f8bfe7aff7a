# Returns (weights, output), the order of the chapter's figure caption, not the contract's.
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
        q = self.w_q(query)[:, :, None, :]  # (B, L, 1, h)
        k = self.w_k(key)[:, None, :, :]  # (B, 1, S, h)
        scores = self.v(torch.tanh(q + k))[..., 0]  # (B, L, S)
        if key_padding_mask is not None:
            scores = scores.masked_fill(key_padding_mask[:, None, :], -float("inf"))
        attn = scores.softmax(-1)
        return attn, torch.bmm(attn, value)
