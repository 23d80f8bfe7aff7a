# Correct: KVCache keeps its tensors in name-mangled private attributes (self.__keys, as in a
# Java-style course), shows them through read-only properties keys and values, and counts the
# positions from the cached keys. (Before: 0 for KVCache, "uses self.__keys", a dunder-like name
# taken for Python's own.) Full marks.
# expect: full
# %% cell: grouped_query_attention
class KVCache:
    def __init__(self):
        self.__keys = None
        self.__values = None

    @property
    def keys(self):
        return self.__keys

    @property
    def values(self):
        return self.__values

    def __len__(self):
        return 0 if self.__keys is None else self.__keys.size(-2)

    def update(self, k, v):
        if self.__keys is None:
            self.__keys, self.__values = k, v
        else:
            self.__keys = torch.cat((self.__keys, k), dim=-2)
            self.__values = torch.cat((self.__values, v), dim=-2)
        return self.__keys, self.__values
