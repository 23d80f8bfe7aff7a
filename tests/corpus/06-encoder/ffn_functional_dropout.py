# A correct FeedForward with clamp(min=0) as the ReLU and F.dropout that follows self.training.
# expect: full
# %% cell: feed_forward
class FeedForward(nn.Module):
    def __init__(self, d_model, dim_feedforward, dropout=0.1):
        super().__init__()
        self.p = dropout
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)

    def forward(self, x):
        h = self.linear1(x).clamp(min=0)
        h = F.dropout(h, p=self.p, training=self.training)
        return self.linear2(h)
