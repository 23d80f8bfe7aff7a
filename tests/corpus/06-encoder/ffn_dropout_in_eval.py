# Calls F.dropout without training=self.training: dropout stays on in eval mode.
# expect: partial
# hint: dropout must be off in eval mode
# %% cell: feed_forward
class FeedForward(nn.Module):
    def __init__(self, d_model, dim_feedforward, dropout=0.1):
        super().__init__()
        self.p = dropout
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)

    def forward(self, x):
        return self.linear2(F.dropout(torch.relu(self.linear1(x)), self.p))
