# Correct: F.cross_entropy with the classes in dimension 1, (B, vocab, L) against (B, L) targets.
# expect: full
# %% cell: train_step
def train_step(model, optimizer, tokens):
    optimizer.zero_grad()
    logits = model(tokens[:, :-1])
    loss = F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:])
    loss.backward()
    optimizer.step()
    return loss.detach().item()
