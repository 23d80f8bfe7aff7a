# Predicts the tokens it reads: the targets are the inputs, not the tokens one position later.
# expect: partial
# hint: targets are the input tokens
# %% cell: train_step
def train_step(model, optimizer, tokens):
    inputs = tokens[:, :-1]
    logits = model(inputs)
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), inputs.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
