# profile_causal.g - fused attention whose FLOPs --profile counts from
# the valid lengths the graph gives (tests/test_codegen_profile.c):
# `causal` masks key t' > t of query t (valid length t + 1, an arange
# along the queries: T (T + 1) / 2 pairs of T x T), `offset` gives query
# t the length t - 2 (rows of length 0 or less count every key), and
# `padded` takes one valid length a batch element, known only at run
# time (every pair counted).
model profile_causal
dim B = 2, T = 24

export def causal(q: f32[B, T, 16], k: f32[B, T, 16], v: f32[B, T, 8])
  valid = broadcast(reshape(arange(1, T + 1), [1, T]), [B, T])
  return masked_softmax(q @ k.T / sqrt(16), valid) @ v

export def offset(q: f32[B, T, 16], k: f32[B, T, 16], v: f32[B, T, 8])
  valid = broadcast(reshape(arange(-2, T - 2), [1, T]), [B, T])
  return masked_softmax(q @ k.T / sqrt(16), valid) @ v

export def padded(q: f32[B, T, 16], k: f32[B, T, 16], v: f32[B, T, 8],
                  valid: i32[B])
  return masked_softmax(q @ k.T / sqrt(16), valid) @ v

# loss_grad (autodiff, in the test) holds the fused_attention_grad of
# the causal attention: twice the forward's FLOPs, over the triangle.
export def loss(x: f32[B * T, 16], w: f32[B, T, 8])
  param W_q, W_k : [16, 16] = normal(0, 1)
  param W_v : [16, 8] = normal(0, 1)
  q = reshape(x @ W_q, [B, T, 16])
  k = reshape(x @ W_k, [B, T, 16])
  v = reshape(x @ W_v, [B, T, 8])
  valid = broadcast(reshape(arange(1, T + 1), [1, T]), [B, T])
  return sum(masked_softmax(q @ k.T / sqrt(16), valid) @ v * w)
