# Attention whose heads are 257 wide (the queries' and keys' d, the
# values' dv 300): one wider than the fused kernels take
# (PASS_ATTN_MAX_WIDTH), so it stays unfused; the 256-wide one fuses.
model wide_heads

dim B, Q, K

def attend(q, k, v)
  return softmax(q @ k.T / sqrt(size(q, -1))) @ v

export def wide(q: f32[B, Q, 257], k: f32[B, K, 257], v: f32[B, K, 300])
  return attend(q, k, v)

export def widest_fused(q: f32[B, Q, 256], k: f32[B, K, 256],
                        v: f32[B, K, 256])
  return attend(q, k, v)

example wide(normal([1, 2, 257]), normal([1, 3, 257]), normal([1, 3, 300]))
example widest_fused(normal([1, 2, 256]), normal([1, 3, 256]),
                     normal([1, 3, 256]))
