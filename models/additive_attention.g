# Additive attention (d2l 10.3.2): queries and keys are projected to a
# common width, added, passed through tanh and scored by w_v.
model additive_attention

dim B, Q, K                            # batch, queries, key-value pairs

const hidden = 8, P = 0.1

# queries (B, Q, q), keys (B, K, k), values (B, K, v), valid (B) or (B, Q)
def additive_attention(queries, keys, values, valid, hidden, p)
  param W_q : [size(queries, -1), hidden]
  param W_k : [size(keys, -1), hidden]
  param w_v : [hidden, 1]
  # (B, Q, 1, h) + (B, 1, K, h) -> (B, Q, K, h)
  features = tanh(unsqueeze(queries @ W_q, 2) + unsqueeze(keys @ W_k, 1))
  scores = squeeze(features @ w_v, -1)                           # (B, Q, K)
  weights = masked_softmax(scores, valid)
  return dropout(weights, p) @ values, weights

export def forward(queries: f32[B, Q, 20], keys: f32[B, K, 2],
                   values: f32[B, K, 4], valid: i32[B])
  context, weights = additive_attention(queries, keys, values, valid, hidden, P)
  return context, weights

# The book's example: every key is the same, so the weights are uniform
# over the valid keys and the result is the mean of the first 2 (6) values:
# [[2, 3, 4, 5]] and [[10, 11, 12, 13]].
example forward(normal([2, 1, 20]), ones([2, 10, 2]),
                repeat(reshape(arange(40.0), [1, 10, 4]), [2, 1, 1]), [2, 6])
