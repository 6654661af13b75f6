# layer_norm.g - layer norms of widths 1 to 1000 over row counts that
# are no multiple of 16, for tests/test_codegen_layer_norm.c: each loss
# is sum(layer_norm(x, gamma, beta) * t), x a parameter (or, at 100 and
# 129 columns, a fused tree of it and t), so its gradient
# holds x's layer_norm_grad and gamma's and beta's column sums of t xhat
# and t.
model layer_norm

export def loss_1(t: f32[21, 1])
  param x1 : [21, 1] = normal(0.5, 1)
  param gamma1 : [1] = normal(1, 0.5)
  param beta1 : [1] = normal(0, 0.5)
  return sum(layer_norm(x1, gamma1, beta1) * t)

export def loss_7(t: f32[21, 7])
  param x7 : [21, 7] = normal(0.5, 1)
  param gamma7 : [7] = normal(1, 0.5)
  param beta7 : [7] = normal(0, 0.5)
  return sum(layer_norm(x7, gamma7, beta7) * t)

export def loss_16(t: f32[21, 16])
  param x16 : [21, 16] = normal(0.5, 1)
  param gamma16 : [16] = normal(1, 0.5)
  param beta16 : [16] = normal(0, 0.5)
  return sum(layer_norm(x16, gamma16, beta16) * t)

export def loss_32(t: f32[37, 32])
  param x32 : [37, 32] = normal(0.5, 1)
  param gamma32 : [32] = normal(1, 0.5)
  param beta32 : [32] = normal(0, 0.5)
  return sum(layer_norm(x32, gamma32, beta32) * t)

# A rank-3 t: the loss reads it through a reshape.
export def loss_33(t: f32[3, 7, 33])
  param x33 : [21, 33] = normal(0.5, 1)
  param gamma33 : [33] = normal(1, 0.5)
  param beta33 : [33] = normal(0, 0.5)
  return sum(layer_norm(x33, gamma33, beta33) * reshape(t, [21, 33]))

export def loss_64(t: f32[21, 64])
  param x64 : [21, 64] = normal(0.5, 1)
  param gamma64 : [64] = normal(1, 0.5)
  param beta64 : [64] = normal(0, 0.5)
  return sum(layer_norm(x64, gamma64, beta64) * t)

export def loss_256(t: f32[19, 256])
  param x256 : [19, 256] = normal(0.5, 1)
  param gamma256 : [256] = normal(1, 0.5)
  param beta256 : [256] = normal(0, 0.5)
  return sum(layer_norm(x256, gamma256, beta256) * t)

export def loss_1000(t: f32[19, 1000])
  param x1000 : [19, 1000] = normal(0.5, 1)
  param gamma1000 : [1000] = normal(1, 0.5)
  param beta1000 : [1000] = normal(0, 0.5)
  return sum(layer_norm(x1000, gamma1000, beta1000) * t)

# x a fused tree (x + t computed in the layer_norm's kernel, kept in its
# output row between passes), in groups of 16 rows
export def loss_100(t: f32[21, 100])
  param x100 : [21, 100] = normal(0.5, 1)
  param gamma100 : [100] = normal(1, 0.5)
  param beta100 : [100] = normal(0, 0.5)
  return sum(layer_norm(x100 + t, gamma100, beta100) * t)

export def loss_129(t: f32[35, 129])
  param x129 : [35, 129] = normal(0.5, 1)
  param gamma129 : [129] = normal(1, 0.5)
  param beta129 : [129] = normal(0, 0.5)
  return sum(layer_norm(x129 * t, gamma129, beta129) * t)
