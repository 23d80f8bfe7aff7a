# Correct: gradients cleared after the step instead of before it (none are left over for the next step),
# and the loss read with float().
# expect: full
# %% cell: train_step
def train_step(model, optimizer, tokens):
    x, y = tokens[:, :-1], tokens[:, 1:]
    logits = model(x)
    loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(loss)
