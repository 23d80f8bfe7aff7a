# A correct FeedForward with an nn.ReLU(inplace=True) module, matmuls written out with the
# Linear weights (x @ W.T + b), and a print.
# expect: full
# %% cell: feed_forward
class FeedForward(nn.Module):
    def __init__(self, d_model, dim_feedforward, dropout=0.1):
        super().__init__()
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.activation = nn.ReLU(inplace=True)
        self.dropout = nn.Dropout(dropout)
        self.linear2 = nn.Linear(dim_feedforward, d_model)

    def forward(self, x):
        print("FeedForward input", tuple(x.shape))
        h = self.activation(x @ self.linear1.weight.T + self.linear1.bias)
        return self.dropout(h) @ self.linear2.weight.T + self.linear2.bias
