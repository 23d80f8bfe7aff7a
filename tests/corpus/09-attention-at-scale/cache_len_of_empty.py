# len reads the shape of keys that are still None.
# expect: partial
# hint: len(cache) is 0 while the cache is empty
# %% cell: grouped_query_attention
class KVCache:
    def __init__(self):
        self.keys = None
        self.values = None

    def __len__(self):
        return self.keys.shape[2]

    def update(self, k, v):
        self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=2)
        self.values = v if self.values is None else torch.cat([self.values, v], dim=2)
        return self.keys, self.values
