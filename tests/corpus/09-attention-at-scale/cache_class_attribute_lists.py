# Keeps its lists in class attributes: every KVCache() shares them, so each case meets the tensors of
# the earlier ones. It calls torch.cat only: never said to call a forbidden function (issue 59).
# expect: partial
# hint: meets tensors whose other axes differ
# %% cell: grouped_query_attention
class KVCache:
    keys_list = []
    values_list = []

    def __len__(self):
        return sum(k.shape[-2] for k in self.keys_list)

    def update(self, k, v):
        self.keys_list.append(k)
        self.values_list.append(v)
        return torch.cat(self.keys_list, dim=-2), torch.cat(self.values_list, dim=-2)
