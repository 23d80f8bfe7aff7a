# Correct; a scratch cell builds nn.MultiheadAttention, runs it on the same query, key and value
# (the names the forward uses too), loads its weights into MultiHeadAttention and compares the
# two. (Before issue 11: MultiHeadAttention "calls nn.MultiheadAttention", 8/18.)
# expect: full
# %% new cell after: test_mha_basic
torch.manual_seed(0)
mha = nn.MultiheadAttention(8, 2, batch_first=True).eval()
query = key = value = torch.randn(2, 5, 8)
attn_output, attn_weights = mha(query, key, value)
mine = MultiHeadAttention(8, 2)
mine.load_state_dict(mha.state_dict())
out, weights = mine(query, key, value)
print(torch.allclose(out, attn_output, atol=1e-6), torch.allclose(weights, attn_weights, atol=1e-6))
print(F.multi_head_attention_forward.__doc__.splitlines()[0])
