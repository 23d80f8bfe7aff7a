# update stores the keys and values but returns nothing.
# expect: partial
# hint: update must return
# %% cell: grouped_query_attention
class KVCache:
    def __init__(self):
        self.keys = None
        self.values = None

    def __len__(self):
        return 0 if self.keys is None else self.keys.shape[2]

    def update(self, k, v):
        self.keys = k if self.keys is None else torch.cat([self.keys, k], dim=2)
        self.values = v if self.values is None else torch.cat([self.values, v], dim=2)
