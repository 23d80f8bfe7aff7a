# KVCache.update stores everything but returns only the new keys and values.
# expect: partial
# hint: return every position so far
# %% cell: parts
class KVCache:
    def __init__(self):
        self.keys = self.values = None

    def __len__(self):
        return 0 if self.keys is None else self.keys.size(-2)

    def update(self, k, v):
        self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=-2)
        self.values = v if self.values is None else torch.cat([self.values, v], dim=-2)
        return k, v
