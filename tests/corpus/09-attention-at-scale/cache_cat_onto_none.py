# Concatenates onto the empty cache's None at the first update.
# expect: partial
# hint: there is nothing to concatenate to
# %% cell: grouped_query_attention
class KVCache:
    def __init__(self):
        self.keys = None
        self.values = None

    def __len__(self):
        return 0 if self.keys is None else self.keys.shape[2]

    def update(self, k, v):
        self.keys = torch.cat([self.keys, k], dim=2)
        self.values = torch.cat([self.values, v], dim=2)
        return self.keys, self.values
