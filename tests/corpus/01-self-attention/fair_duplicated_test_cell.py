# Correct; the visible test cell of attention_scores was copied below the next solution cell
# and run again, and a scratch cell compares with F.scaled_dot_product_attention.
# expect: full
# %% copy of: test_attention_scores after: simple_self_attention
# %% new cell after: test_simple_self_attention
import torch.nn.functional as F

x = torch.randn(2, 5, 8)
print(torch.allclose(simple_self_attention(x), F.scaled_dot_product_attention(x, x, x, scale=1.0), atol=1e-6))
