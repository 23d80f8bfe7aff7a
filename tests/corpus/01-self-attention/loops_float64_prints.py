# A correct solution with Python loops over the batch, computing in float64 and casting back,
# that prints and warns while it works (a correct solution earns full marks even so).
# expect: full
# %% cell: attention_scores
def attention_scores(x):
    print("scores for", tuple(x.shape))
    return torch.stack([torch.mm(sentence, sentence.t()) for sentence in x])
# %% cell: simple_self_attention
import warnings


def simple_self_attention(x):
    warnings.warn("computing in float64")
    outputs, all_weights = [], []
    for sentence in x.double():
        scores = sentence @ sentence.T / math.sqrt(sentence.shape[1])
        weights = torch.softmax(scores, dim=1)
        outputs.append(weights @ sentence)
        all_weights.append(weights)
    return torch.stack(outputs).to(x.dtype), torch.stack(all_weights).to(x.dtype)
