# update returns only the keys, not the pair (keys, values).
# expect: partial
# graded: KVCache
# locus: (keys, values)|only the keys|both keys and values|and the values
# %% cell: grouped_query_attention
class KVCache:
    """Keys and values of the positions seen so far: (B, heads, positions, head_dim), None while empty."""

    def __init__(self):
        self.k_all, self.v_all = None, None

    def __len__(self):
        return self.k_all.size(-2) if self.k_all is not None else 0

    def update(self, k, v):
        """Append k, v (B, heads, t, head_dim); return all cached (keys, values), (B, heads, n, head_dim)."""
        if self.k_all is None:
            self.k_all, self.v_all = k, v
        else:
            self.k_all = torch.cat((self.k_all, k), dim=2)  # (B, heads, n, head_dim)
            self.v_all = torch.cat((self.v_all, v), dim=2)
        return self.k_all
