# A correct solution with explicit Python loops that prints and warns while it works; it masks
# with -1e9 through a "keep" mask (as the source text does: masked_fill(mask == 0, -1e9)), which
# still gives weights of exactly 0, and the causal mask comes from PyTorch's float mask.
# expect: full
# %% cell: padding_mask
import warnings


def padding_mask(tokens, pad_id=0):
    print("padding mask of", tuple(tokens.shape))
    rows = [[int(t) == pad_id for t in sentence] for sentence in tokens.tolist()]
    return torch.tensor(rows, dtype=torch.bool, device=tokens.device).reshape(tokens.shape)
# %% cell: causal_mask
def causal_mask(size):
    warnings.warn("building a causal mask")
    return nn.Transformer.generate_square_subsequent_mask(size) == float("-inf")
# %% cell: merge_masks
def merge_masks(key_padding_mask, attn_mask, num_heads):
    device = (key_padding_mask if key_padding_mask is not None else attn_mask).device
    if key_padding_mask is not None:
        B, S = key_padding_mask.shape
    else:
        B = attn_mask.shape[0] // num_heads if attn_mask.dim() == 3 else 1
        S = attn_mask.shape[-1]
    L = attn_mask.shape[-2] if attn_mask is not None else 1
    out = torch.zeros(B, num_heads, L, S, dtype=torch.bool, device=device)
    for b in range(B):
        for h in range(num_heads):
            for i in range(L):
                for j in range(S):
                    hidden = bool(key_padding_mask[b, j]) if key_padding_mask is not None else False
                    if attn_mask is not None:
                        hidden = hidden or bool(attn_mask[b * num_heads + h, i, j] if attn_mask.dim() == 3
                                                else attn_mask[i, j])
                    out[b, h, i, j] = hidden
    print("merged", tuple(out.shape))
    return out
# %% cell: masked_attention
import sys


def masked_attention(query, key, value, key_padding_mask=None, attn_mask=None):
    print("debug: query", tuple(query.shape), file=sys.stderr)
    L, S = query.shape[-2], key.shape[-2]
    keep = torch.ones(query.shape[:-2] + (L, S), dtype=torch.long, device=query.device)  # 1 = may attend
    for b in range(query.shape[0]):
        for j in range(S):
            if key_padding_mask is not None and key_padding_mask[b, j]:
                keep[b, ..., j] = 0
    if attn_mask is not None:
        keep = keep * (~attn_mask).long()
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.shape[-1])
    weights = F.softmax(scores.masked_fill(keep == 0, -1e9), dim=-1)
    return torch.matmul(weights, value), weights
