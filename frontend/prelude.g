# prelude.g - the layers every model may use, written in the language
# itself and loaded before each file (a file may not redefine them).
#
# They follow the d2l.ai book and PyTorch: each call of a layer gets its
# own parameters, named after the call path (`encoder.linear_0.W`).
# Shapes: B batch, T steps, D width, H heads, V vocabulary.

# nn.Linear: x (..., in) -> (..., n_out). Weights Xavier-uniform as d2l's
# train_seq2seq initializes them; the bias keeps PyTorch's default,
# uniform(-1/sqrt(in), 1/sqrt(in)), which d2l does not touch.
def linear(x, n_out, bias = true)
  k = 1 / sqrt(size(x, -1))
  param W : [size(x, -1), n_out] = xavier_uniform
  if bias
    param b : [n_out] = uniform(-k, k)
    return x @ W + b
  return x @ W

# nn.LayerNorm over the last axis, with a learned scale and shift.
def norm(x, eps = 1e-5)
  param gamma : [size(x, -1)] = ones
  param beta : [size(x, -1)] = zeros
  return layer_norm(x, gamma, beta, eps)

# nn.Embedding: ids (...) i32 -> (..., width), a table initialized N(0, 1).
def embed(ids, vocab, width)
  param table : [vocab, width] = normal(0, 1)
  return embedding(ids, table)

# One step of nn.GRU, with PyTorch's gate equations (gates r, z, n, in
# that order along the 3*hidden axis):
#   r  = sigmoid(W_ir x + b_ir + W_hr h + b_hr)
#   z  = sigmoid(W_iz x + b_iz + W_hz h + b_hz)
#   n  = tanh(W_in x + b_in + r * (W_hn h + b_hn))
#   h' = (1 - z) * n + z * h
# x (B, in), h (B, hidden). Weights Xavier-uniform (d2l re-initializes
# them so); biases keep PyTorch's uniform(-1/sqrt(hidden), 1/sqrt(hidden)).
def gru_cell(x, h, hidden)
  k = 1 / sqrt(hidden)
  param W_x : [size(x, -1), 3 * hidden] = xavier_uniform
  param W_h : [hidden, 3 * hidden] = xavier_uniform
  param b_x, b_h : [3 * hidden] = uniform(-k, k)
  gx = x @ W_x + b_x                       # (B, 3*hidden)
  gh = h @ W_h + b_h
  r = sigmoid(slice(gx, -1, 0, hidden) + slice(gh, -1, 0, hidden))
  z = sigmoid(slice(gx, -1, hidden, 2 * hidden) +
              slice(gh, -1, hidden, 2 * hidden))
  n = tanh(slice(gx, -1, 2 * hidden, 3 * hidden) +
           r * slice(gh, -1, 2 * hidden, 3 * hidden))
  return (1 - z) * n + z * h

# nn.GRU (one layer) unrolled over time: xs (T, B, in), h0 (B, hidden).
# Every step shares the cell's weights. Returns the outputs (T, B, hidden)
# and the last state (B, hidden).
def gru(xs, h0, hidden)
  h = h0
  outs = []
  for t in 0..size(xs, 0)
    h = gru_cell(xs[t], h, hidden)
    outs = outs + [h]
  return stack(outs, 0), h

# Sinusoidal positional encoding (d2l PositionalEncoding), a (T, D)
# constant: P[i, 2j] = sin(i / 10000^(2j/D)), P[i, 2j+1] = cos(same).
def positional(T, D)
  i = reshape(arange(0.0, T), [T, 1])             # (T, 1)
  freq = pow(10000.0, arange(0.0, D, 2) / D)      # (D/2,)
  angle = i / freq                                # (T, D/2)
  return reshape(stack([sin(angle), cos(angle)], -1), [T, D])

# d2l transpose_qkv: (B, S, D) -> (B*H, S, D/H), heads split off the
# last axis and moved next to the batch.
def split_heads(x, H)
  x = reshape(x, [size(x, 0), size(x, 1), H, size(x, 2) / H])
  x = permute(x, [0, 2, 1, 3])                    # (B, H, S, D/H)
  return reshape(x, [size(x, 0) * H, size(x, 2), size(x, 3)])

# d2l transpose_output, the inverse: (B*H, S, D/H) -> (B, S, D).
def merge_heads(x, H)
  x = reshape(x, [size(x, 0) / H, H, size(x, 1), size(x, 2)])
  x = permute(x, [0, 2, 1, 3])                    # (B, S, H, D/H)
  return reshape(x, [size(x, 0), size(x, 1), H * size(x, 3)])

# d2l sequence_mask as weights: valid (B,) i32 -> (B, T) f32, 1 where
# t < valid[b], else 0.
def sequence_mask(valid, T)
  steps = reshape(arange(T), [1, T])              # (1, T)
  return cast(steps < unsqueeze(valid, -1), f32)

# d2l MaskedSoftmaxCELoss: logits (B, T, V), labels (B, T) i32, valid (B,)
# -> (B,): per-token cross-entropy, masked past each valid length, then
# averaged over the T steps.
def masked_ce(logits, labels, valid)
  weights = sequence_mask(valid, size(labels, -1))
  return mean(cross_entropy(logits, labels) * weights, axis = -1)
