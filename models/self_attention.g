# Self-attention and positional encoding (d2l 10.6): queries, keys and
# values are the same sequence; the sinusoidal table
# P[i, 2j] = sin(i / 10000^(2j/d)), P[i, 2j+1] = cos(i / 10000^(2j/d))
# is a constant the compiler computes while compiling.
model self_attention

dim B                                  # batch

const D = 100, H = 5, P = 0.5, S = 4

def multihead_attention(queries, keys, values, valid, D, H, p)
  param W_q : [size(queries, -1), D]
  param W_k : [size(keys, -1), D]
  param W_v : [size(values, -1), D]
  param W_o : [D, D]
  q = split_heads(queries @ W_q, H)
  k = split_heads(keys @ W_k, H)
  v = split_heads(values @ W_v, H)
  weights = masked_softmax(q @ k.T / sqrt(D / H), repeat_interleave(valid, H, 0))
  return merge_heads(dropout(weights, p) @ v, H) @ W_o, weights

# X (B, S, D): positions added, then self-attention.
export def forward(X: f32[B, S, D], valid: i32[B])
  X = dropout(X + positional(S, D), P)
  out, weights = multihead_attention(X, X, X, valid, D, H, P)
  return out, weights

# The table P of the book's figure: 60 positions, 32 dimensions
# (attnc models/self_attention.g --interp --entry encoding
#  --heatmap P.svg --heatmap-output P draws it).
export def encoding()
  P = positional(60, 32)
  return P

example forward(ones([2, S, D]), [3, 2])
example encoding()
