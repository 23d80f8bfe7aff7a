# Correct; scratch cells compare LayerNorm with nn.LayerNorm and F.layer_norm, and EncoderLayer
# and Encoder with nn.TransformerEncoderLayer and nn.TransformerEncoder; the setup cell was
# pasted again too. (Before issue 11: 0 for the whole assignment.)
# expect: full
# %% new cell after: test_layer_norm
x = torch.randn(2, 5, 8)
print(torch.allclose(LayerNorm(8)(x), nn.LayerNorm(8)(x), atol=1e-6),
      torch.allclose(LayerNorm(8)(x), F.layer_norm(x, (8,)), atol=1e-6))
# %% copy of: setup after: test_feed_forward
# %% new cell after: test_encoder
torch.manual_seed(0)
ref_layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True).eval()
mine_layer = EncoderLayer(8, 2, dim_feedforward=16).eval()
mine_layer.load_state_dict(ref_layer.state_dict())
print(torch.allclose(mine_layer(x), ref_layer(x), atol=1e-5))
ref = nn.TransformerEncoder(ref_layer, 2, enable_nested_tensor=False).eval()
mine = Encoder(mine_layer, 2).eval()
mine.load_state_dict(ref.state_dict())
print(torch.allclose(mine(x), ref(x), atol=1e-5))
