# Multi-head attention (d2l 10.5): 5 heads over 100 hidden units. The
# heads are split and merged by reshapes and permutes (a change of layout,
# not a copy), and each head runs scaled dot-product attention.
model multihead_attention

dim B, Q, K                            # batch, queries, key-value pairs

const D = 100, H = 5, P = 0.5

# queries (B, Q, q), keys (B, K, k), values (B, K, v), valid (B) or (B, Q)
def multihead_attention(queries, keys, values, valid, D, H, p)
  param W_q : [size(queries, -1), D]
  param W_k : [size(keys, -1), D]
  param W_v : [size(values, -1), D]
  param W_o : [D, D]
  q = split_heads(queries @ W_q, H)                  # (B*H, Q, D/H)
  k = split_heads(keys @ W_k, H)                     # (B*H, K, D/H)
  v = split_heads(values @ W_v, H)
  scores = q @ k.T / sqrt(D / H)                     # (B*H, Q, K)
  weights = masked_softmax(scores, repeat_interleave(valid, H, 0))
  context = dropout(weights, p) @ v                  # (B*H, Q, D/H)
  return merge_heads(context, H) @ W_o, weights      # (B, Q, D)

export def forward(queries: f32[B, Q, D], keys: f32[B, K, D],
                   values: f32[B, K, D], valid: i32[B])
  out, weights = multihead_attention(queries, keys, values, valid, D, H, P)
  return out, weights

# The book's example: the output has shape (2, 4, 100).
example forward(ones([2, 4, D]), ones([2, 6, D]), ones([2, 6, D]), [3, 2])
