# Right computation in an nn.Sequential: its parameters are named net.0.weight, ..., so the
# weights of linear1 and linear2 cannot be loaded.
# expect: partial
# hint: name the submodules and parameters as
# %% cell: feed_forward
class FeedForward(nn.Module):
    def __init__(self, d_model, dim_feedforward, dropout=0.1):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(d_model, dim_feedforward), nn.ReLU(), nn.Dropout(dropout), nn.Linear(dim_feedforward, d_model)
        )

    def forward(self, x):
        return self.net(x)
