# Right values, but computed in NumPy's default float64 and returned as float64.
# expect: partial
# hint: expected float32
# %% cell: positional_encoding
import numpy as np


def positional_encoding(max_len, d_model):
    pos = np.arange(max_len)[:, None]
    two_i = np.arange(0, d_model, 2)[None, :]
    angle = pos / np.power(10000, two_i / d_model)
    pe = np.zeros((max_len, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return torch.from_numpy(pe)
