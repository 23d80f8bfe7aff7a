# A correct solution with explicit loops over the batch and the heads, computed in float64
# inside and cast back, with a hand-written softmax; it registers out_proj before the other
# parameters, initialises them its own way, and prints and warns while it works. The counts
# come from the student's own module and from PyTorch's FLOP counter on the meta device.
# expect: full
# %% cell: split_heads
def split_heads(x, num_heads):
    print("split", tuple(x.shape))
    B, L, E = x.shape
    return x.view(B, L, num_heads, -1).permute(0, 2, 1, 3).contiguous()
# %% cell: merge_heads
def merge_heads(x):
    return x.permute(0, 2, 1, 3).flatten(start_dim=2)
# %% cell: MultiHeadAttention
import warnings


class MultiHeadAttention(nn.Module):
    def __init__(self, embed_dim, num_heads, bias=True):
        super().__init__()
        print(f"building {num_heads} heads of width {embed_dim // num_heads}")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.out_proj = nn.Linear(embed_dim, embed_dim, bias=bias)
        self.in_proj_weight = nn.Parameter(torch.empty(3 * embed_dim, embed_dim))
        self.register_parameter("in_proj_bias", nn.Parameter(torch.empty(3 * embed_dim)) if bias else None)
        nn.init.normal_(self.in_proj_weight, std=0.02)
        if bias:
            nn.init.zeros_(self.in_proj_bias)

    def forward(self, query, key, value, key_padding_mask=None, attn_mask=None,
                need_weights=True, average_attn_weights=True):
        warnings.warn("Python loops: slow")
        E, H = self.embed_dim, self.num_heads
        d = E // H
        B, L, _ = query.shape
        S = key.shape[1]
        W = self.in_proj_weight.double()
        b = torch.zeros(3 * E, dtype=torch.float64, device=query.device)
        if self.in_proj_bias is not None:
            b = self.in_proj_bias.double()
        q_all = query.double() @ W[:E].T + b[:E]
        k_all = key.double() @ W[E:2 * E].T + b[E:2 * E]
        v_all = value.double() @ W[2 * E:].T + b[2 * E:]
        out = torch.zeros(B, L, E, dtype=torch.float64, device=query.device)
        weights = torch.zeros(B, H, L, S, dtype=torch.float64, device=query.device)
        for i in range(B):
            for h in range(H):
                cols = slice(h * d, (h + 1) * d)
                s = q_all[i, :, cols] @ k_all[i, :, cols].T / math.sqrt(d)  # (L, S)
                masks = [] if attn_mask is None else [attn_mask[i * H + h] if attn_mask.dim() == 3 else attn_mask]
                masks += [] if key_padding_mask is None else [key_padding_mask[i]]
                for m in masks:
                    s = s.masked_fill(m, float("-inf")) if m.dtype == torch.bool else s + m.double()
                e = torch.exp(s - s.max(dim=-1, keepdim=True).values)
                w = e / e.sum(dim=-1, keepdim=True)
                weights[i, h] = w
                out[i, :, cols] = w @ v_all[i, :, cols]
        out = out @ self.out_proj.weight.double().T
        if self.out_proj.bias is not None:
            out = out + self.out_proj.bias.double()
        print("attention done")
        if not need_weights:
            return out.to(query.dtype), None
        weights = weights.mean(dim=1) if average_attn_weights else weights
        return out.to(query.dtype), weights.to(query.dtype)
# %% cell: mha_parameter_count
def mha_parameter_count(embed_dim, num_heads, bias=True):
    module = MultiHeadAttention(embed_dim, num_heads, bias=bias)
    return sum(p.numel() for p in module.parameters())
# %% cell: mha_multiply_adds
from torch.utils.flop_counter import FlopCounterMode


def mha_multiply_adds(n, d, num_heads):
    # the reference module of part 2 is not the one above; count a plain version on the meta device
    with torch.device("meta"):
        w_in, w_out = torch.empty(3 * d, d), torch.empty(d, d)
        x = torch.empty(1, n, d)
    with FlopCounterMode(display=False) as counter:
        q, k, v = (split_heads(t, num_heads) for t in (x @ w_in.T).chunk(3, dim=-1))
        weights = (q @ k.transpose(-2, -1)).softmax(-1)
        merge_heads(weights @ v) @ w_out.T
    return counter.get_total_flops() // 2  # a multiply-add is 2 FLOPs
