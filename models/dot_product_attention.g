# Scaled dot-product attention with a masked softmax (d2l 10.3.3), and the
# section's two small demonstrations (batch matrix multiplication and the
# masked softmax's zero pattern).
model dot_product_attention

dim B, Q, K                            # batch, queries, key-value pairs

# queries (B, Q, d), keys (B, K, d), values (B, K, v), valid (B) or (B, Q)
def dot_product_attention(queries, keys, values, valid, p = 0.1)
  scores = queries @ keys.T / sqrt(size(queries, -1))
  weights = masked_softmax(scores, valid)
  return dropout(weights, p) @ values, weights

export def forward(queries: f32[B, Q, 2], keys: f32[B, K, 2],
                   values: f32[B, K, 4], valid: i32[B])
  context, weights = dot_product_attention(queries, keys, values, valid)
  return context, weights

example forward(normal([2, 1, 2]), ones([2, 10, 2]),
                repeat(reshape(arange(40.0), [1, 10, 4]), [2, 1, 1]), [2, 6])

# torch.bmm(weights.unsqueeze(1), values.unsqueeze(-1)) = [[[4.5]], [[14.5]]]
export def bmm_demo()
  weights = ones([2, 10]) * 0.1
  values = reshape(arange(20.0), [2, 10])
  return unsqueeze(weights, 1) @ unsqueeze(values, -1)

# Valid lengths per batch, then per query.
export def masked_softmax_demo(x: f32[2, 2, 4])
  return masked_softmax(x, [2, 3]), masked_softmax(x, [[1, 3], [2, 4]])

example bmm_demo()
example masked_softmax_demo(uniform([2, 2, 4]))
