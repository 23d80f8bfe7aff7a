# len(cache) counts the calls of update.
# expect: partial
# hint: counts the calls of update
# %% cell: grouped_query_attention
class KVCache:
    """Keys and values of the positions seen so far: (B, heads, positions, head_dim), None while empty."""

    def __init__(self):
        self.keys = None
        self.values = None
        self.updates = 0

    def __len__(self):
        return self.updates

    def update(self, k, v):
        """Append k, v (B, heads, t, head_dim); return all cached (keys, values), (B, heads, n, head_dim)."""
        self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=-2)
        self.values = v if self.values is None else torch.cat([self.values, v], dim=-2)
        self.updates += 1
        return self.keys, self.values
