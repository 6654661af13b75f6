# rnn_uncarried.g - a recurrent character model whose decode_step returns
# its state under another name (h2, not h): --generate cannot carry it,
# which must be said before training, not after.
model rnn_uncarried

dim B, V
const D = 8, T = 4

def step(tok, h)
  param W : [D, D] = normal(0, 0.3)
  h = tanh(embed(tok, V, D) + h @ W)
  return linear(h, V), h

export def loss(tokens: i32[B, T], targets: i32[B, T])
  h = zeros([1, D])
  total = 0.0
  for t in 0..T
    logits, h = step(tokens[:, t], h)
    total = total + mean(cross_entropy(logits, targets[:, t]))
  return total / T

export def decode_step(tok: i32[B, 1], pos: i32[1], h: f32[B, D])
  logits, h2 = step(reshape(tok, [B]), h)
  return logits, h2

train
  data = text(steps = T)
  batch = 8
  optimizer = adam(lr = 0.01)
  epochs = 1
