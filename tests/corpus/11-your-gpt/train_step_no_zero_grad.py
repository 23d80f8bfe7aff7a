# Never clears the gradients: each step applies the sum of every gradient so far.
# expect: partial
# hint: gradients pile up
# %% cell: train_step
def train_step(model, optimizer, tokens):
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
    loss.backward()
    optimizer.step()
    return loss.item()
