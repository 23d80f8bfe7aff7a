# Concatenates the new keys and values along dim 0 (the batch) instead of the positions (dim 2).
# expect: partial
# graded: KVCache
# locus: dim=2|dim=-2|positions axis|batch axis|dim 0|dim=0
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
            self.k_all = torch.cat((self.k_all, k), dim=0)  # (B, heads, n, head_dim)
            self.v_all = torch.cat((self.v_all, v), dim=0)
        return self.k_all, self.v_all
