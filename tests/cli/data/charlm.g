# charlm.g - a character-level model written for the tests of
# data = text(...): an embedding, an MLP, the next character's loss.
model charlm

dim B, V
const D = 32, T = 16

export def loss(tokens: i32[B, T], targets: i32[B, T])
  x = embed(tokens, V, D)
  logits = linear(relu(linear(x, 64)), V)
  return mean(cross_entropy(logits, targets))

train
  data = text(steps = T, valid = 0.1)
  batch = 32
  optimizer = adam(lr = 0.01)
  epochs = 2
