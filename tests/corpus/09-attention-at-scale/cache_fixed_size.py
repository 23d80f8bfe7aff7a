# Preallocates room for 4 positions: more positions do not fit.
# expect: partial
# hint: room for a fixed number of positions
# %% cell: grouped_query_attention
class KVCache:
    def __init__(self, max_len=4):
        self.max_len, self.n = max_len, 0
        self.keys = self.values = None

    def __len__(self):
        return self.n

    def update(self, k, v):
        if self.keys is None:
            self.keys = k.new_zeros(*k.shape[:2], self.max_len, k.shape[-1])
            self.values = v.new_zeros(*v.shape[:2], self.max_len, v.shape[-1])
        t = k.shape[2]
        self.keys[:, :, self.n:self.n + t] = k
        self.values[:, :, self.n:self.n + t] = v
        self.n += t
        return self.keys[:, :, :self.n], self.values[:, :, :self.n]
