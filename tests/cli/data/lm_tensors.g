# lm_tensors.g - a next-token model written for the tests, trained from
# a safetensors file of tokens and targets (data = tensors(...)): an
# embedding, one causal attention layer with layer norm and ReLU, and
# the mean cross-entropy over the B*T positions.
model lm_tensors

dim B, T

const V = 12, D = 16

def attend(x)
  param W_q, W_k, W_v : [D, D]
  steps = size(x, 1)
  causal = broadcast(reshape(arange(1, steps + 1), [1, steps]),
                     [size(x, 0), steps])
  w = masked_softmax((x @ W_q) @ (x @ W_k).T / sqrt(D), causal)
  return w @ (x @ W_v)

export def loss(tokens: i32[B, T], targets: i32[B, T])
  x = embed(tokens, V, D)
  x = norm(x + attend(x))
  logits = linear(relu(linear(x, 32)), V)
  return mean(cross_entropy(reshape(logits, [B * T, V]), reshape(targets, [B * T])))

train
  data = tensors(file = "lm_tensors.safetensors", valid = 0.25)
  batch = 8
  optimizer = adam(lr = 0.02)
  epochs = 6
