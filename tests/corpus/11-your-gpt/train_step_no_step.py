# Computes the gradients and never applies them.
# expect: partial
# hint: optimizer.step() applies the gradients
# %% cell: train_step
def train_step(model, optimizer, tokens):
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), tokens[:, 1:].reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    return loss.item()
