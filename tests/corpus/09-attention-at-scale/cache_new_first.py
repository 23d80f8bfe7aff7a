# The cache puts each update in front of the positions already cached.
# expect: partial
# hint: new positions before the old ones
# %% cell: grouped_query_attention
class KVCache:
    """Keys and values of the positions seen so far: (B, heads, positions, head_dim), None while empty."""

    def __init__(self):
        self.keys = None
        self.values = None

    def __len__(self):
        return 0 if self.keys is None else self.keys.shape[-2]

    def update(self, k, v):
        """Append k, v (B, heads, t, head_dim); return all cached (keys, values), (B, heads, n, head_dim)."""
        self.keys = k if self.keys is None else torch.cat([k, self.keys], dim=-2)
        self.values = v if self.values is None else torch.cat([v, self.values], dim=-2)
        return self.keys, self.values
