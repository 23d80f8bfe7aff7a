# Correct: a cache that keeps the chunks in lists and joins them when asked, its length counted as it grows.
# expect: full
# %% cell: parts
class KVCache:
    def __init__(self):
        self.key_chunks, self.value_chunks, self.n = [], [], 0
        self.keys = self.values = None

    def __len__(self):
        return self.n

    def update(self, k, v):
        self.key_chunks.append(k)
        self.value_chunks.append(v)
        self.n += k.shape[-2]
        self.keys = torch.cat(self.key_chunks, dim=2)
        self.values = torch.cat(self.value_chunks, dim=2)
        return self.keys, self.values
