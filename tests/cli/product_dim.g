# A product dim B*T that the inputs make inconsistent: tokens give
# B = 2, T = 3, so rows must have 6 rows, not 5.
model product_dim

dim B, T

export def forward(tokens: i32[B, T], rows: f32[B * T, 4])
  return reshape(rows, [B, T, 4]) + cast(unsqueeze(tokens, -1), f32)

example forward([[1, 2, 3], [4, 5, 6]], ones([5, 4]))
