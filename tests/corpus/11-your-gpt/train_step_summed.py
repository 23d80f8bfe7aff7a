# Sums the loss over the positions instead of averaging it.
# expect: partial
# hint: sum over the positions
# %% cell: train_step
def train_step(model, optimizer, tokens):
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1), reduction="sum")
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()
