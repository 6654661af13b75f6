# small_matmul.g - products below the sgemm's threshold (M x N x K
# under 4096), run row by row in cg_lower_nn.c's matmul_row, for
# tests/test_codegen_small_matmul.c: fwd_I returns x @ B and x @ C^T;
# loss_I sums the same products of a parameter against t, so that its
# gradient holds more such products.
model small_matmul

export def fwd_0(x: f32[15, 17])
  param B0 : [17, 1] = normal(0, 1)
  param C0 : [1, 17] = normal(0, 1)
  return x @ B0, x @ transpose(C0, 0, 1)

export def loss_0(t: f32[15, 1])
  param A0 : [15, 17] = normal(0, 1)
  param B0 : [17, 1] = normal(0, 1)
  param C0 : [1, 17] = normal(0, 1)
  return sum((A0 @ B0) * t) + sum((A0 @ transpose(C0, 0, 1)) * t * t)

export def fwd_1(x: f32[21, 33])
  param B1 : [33, 1] = normal(0, 1)
  param C1 : [1, 33] = normal(0, 1)
  return x @ B1, x @ transpose(C1, 0, 1)

export def loss_1(t: f32[21, 1])
  param A1 : [21, 33] = normal(0, 1)
  param B1 : [33, 1] = normal(0, 1)
  param C1 : [1, 33] = normal(0, 1)
  return sum((A1 @ B1) * t) + sum((A1 @ transpose(C1, 0, 1)) * t * t)

export def fwd_2(x: f32[15, 17])
  param B2 : [17, 3] = normal(0, 1)
  param C2 : [3, 17] = normal(0, 1)
  return x @ B2, x @ transpose(C2, 0, 1)

export def loss_2(t: f32[15, 3])
  param A2 : [15, 17] = normal(0, 1)
  param B2 : [17, 3] = normal(0, 1)
  param C2 : [3, 17] = normal(0, 1)
  return sum((A2 @ B2) * t) + sum((A2 @ transpose(C2, 0, 1)) * t * t)

export def fwd_3(x: f32[37, 5])
  param B3 : [5, 1] = normal(0, 1)
  param C3 : [1, 5] = normal(0, 1)
  return x @ B3, x @ transpose(C3, 0, 1)

export def loss_3(t: f32[37, 1])
  param A3 : [37, 5] = normal(0, 1)
  param B3 : [5, 1] = normal(0, 1)
  param C3 : [1, 5] = normal(0, 1)
  return sum((A3 @ B3) * t) + sum((A3 @ transpose(C3, 0, 1)) * t * t)

export def fwd_4(x: f32[9, 64])
  param B4 : [64, 2] = normal(0, 1)
  param C4 : [2, 64] = normal(0, 1)
  return x @ B4, x @ transpose(C4, 0, 1)

export def loss_4(t: f32[9, 2])
  param A4 : [9, 64] = normal(0, 1)
  param B4 : [64, 2] = normal(0, 1)
  param C4 : [2, 64] = normal(0, 1)
  return sum((A4 @ B4) * t) + sum((A4 @ transpose(C4, 0, 1)) * t * t)
