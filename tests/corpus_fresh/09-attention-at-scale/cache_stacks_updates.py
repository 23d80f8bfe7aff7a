# Keeps a list of updates and stacks them (a new axis) instead of concatenating along the positions.
# expect: partial
# graded: KVCache
# locus: stack|torch.cat|positions axis|concatenate
# %% cell: grouped_query_attention
class KVCache:
    def __init__(self):
        self.keys, self.values = [], []

    def __len__(self):
        return sum(k.size(-2) for k in self.keys)

    def update(self, k, v):
        self.keys.append(k)
        self.values.append(v)
        if len(self.keys) == 1:
            return k, v
        return torch.stack(self.keys, dim=2).flatten(2, 3), torch.stack(self.values, dim=2).flatten(2, 3)
