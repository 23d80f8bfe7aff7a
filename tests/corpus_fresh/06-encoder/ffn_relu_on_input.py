# Also applies a ReLU to the input before linear1.
# expect: partial
# graded: FeedForward
# locus: relu(x)|before linear1|the input itself|relu of the input|on the input
# %% cell: feed_forward
class FeedForward(nn.Module):
    """Position-wise feed-forward network: linear2(dropout(relu(linear1(x)))).

    x: (..., d_model) -> (..., d_model)
    """

    def __init__(self, d_model, dim_feedforward, dropout=0.1):
        super().__init__()
        # nn.TransformerEncoderLayer's names: d_model -> dim_feedforward -> d_model
        self.linear1, self.linear2 = nn.Linear(d_model, dim_feedforward), nn.Linear(dim_feedforward, d_model)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x):
        h = torch.relu(self.linear1(torch.relu(x)))  # (..., dim_feedforward)
        return self.linear2(self.dropout(h))  # (..., d_model)
