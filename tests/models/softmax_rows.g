# softmax_rows.g - the softmax family and cross entropy over rows of
# widths 1 to 257, row counts no multiple of 8, for
# tests/test_codegen_softmax_rows.c: fwd_W returns each op's rows (x
# scaled to [-4, 4)); loss_W sums them against t, so that its gradient
# holds cross entropy's backward. v and lab are constants: valid lengths
# 0 to W and labels 0 to W - 1.
model softmax_rows

export def fwd_1(x: f32[21, 1])
  v = cast(uniform([21], high = 1.99, seed = 1), i32)
  lab = cast(uniform([21], high = 1.0 - 0.01, seed = 2), i32)
  y = x * 4
  return softmax(y), log_softmax(y), masked_softmax(y, v), cross_entropy(y, lab)

export def loss_1(t: f32[21, 1])
  param x1 : [21, 1] = normal(0, 3)
  v = cast(uniform([21], high = 1.99, seed = 1), i32)
  lab = cast(uniform([21], high = 1.0 - 0.01, seed = 2), i32)
  s = sum(softmax(x1) * t) + sum(log_softmax(x1) * t)
  return s + sum(masked_softmax(x1, v) * t) + sum(cross_entropy(x1, lab) * t[:, 0])

export def fwd_4(x: f32[21, 4])
  v = cast(uniform([21], high = 4.99, seed = 4), i32)
  lab = cast(uniform([21], high = 4.0 - 0.01, seed = 5), i32)
  y = x * 4
  return softmax(y), log_softmax(y), masked_softmax(y, v), cross_entropy(y, lab)

export def loss_4(t: f32[21, 4])
  param x4 : [21, 4] = normal(0, 3)
  v = cast(uniform([21], high = 4.99, seed = 4), i32)
  lab = cast(uniform([21], high = 4.0 - 0.01, seed = 5), i32)
  s = sum(softmax(x4) * t) + sum(log_softmax(x4) * t)
  return s + sum(masked_softmax(x4, v) * t) + sum(cross_entropy(x4, lab) * t[:, 0])

export def fwd_6(x: f32[21, 6])
  v = cast(uniform([21], high = 6.99, seed = 6), i32)
  lab = cast(uniform([21], high = 6.0 - 0.01, seed = 7), i32)
  y = x * 4
  return softmax(y), log_softmax(y), masked_softmax(y, v), cross_entropy(y, lab)

export def loss_6(t: f32[21, 6])
  param x6 : [21, 6] = normal(0, 3)
  v = cast(uniform([21], high = 6.99, seed = 6), i32)
  lab = cast(uniform([21], high = 6.0 - 0.01, seed = 7), i32)
  s = sum(softmax(x6) * t) + sum(log_softmax(x6) * t)
  return s + sum(masked_softmax(x6, v) * t) + sum(cross_entropy(x6, lab) * t[:, 0])

export def fwd_7(x: f32[21, 7])
  v = cast(uniform([21], high = 7.99, seed = 7), i32)
  lab = cast(uniform([21], high = 7.0 - 0.01, seed = 8), i32)
  y = x * 4
  return softmax(y), log_softmax(y), masked_softmax(y, v), cross_entropy(y, lab)

export def loss_7(t: f32[21, 7])
  param x7 : [21, 7] = normal(0, 3)
  v = cast(uniform([21], high = 7.99, seed = 7), i32)
  lab = cast(uniform([21], high = 7.0 - 0.01, seed = 8), i32)
  s = sum(softmax(x7) * t) + sum(log_softmax(x7) * t)
  return s + sum(masked_softmax(x7, v) * t) + sum(cross_entropy(x7, lab) * t[:, 0])

export def fwd_8(x: f32[21, 8])
  v = cast(uniform([21], high = 8.99, seed = 8), i32)
  lab = cast(uniform([21], high = 8.0 - 0.01, seed = 9), i32)
  y = x * 4
  return softmax(y), log_softmax(y), masked_softmax(y, v), cross_entropy(y, lab)

export def loss_8(t: f32[21, 8])
  param x8 : [21, 8] = normal(0, 3)
  v = cast(uniform([21], high = 8.99, seed = 8), i32)
  lab = cast(uniform([21], high = 8.0 - 0.01, seed = 9), i32)
  s = sum(softmax(x8) * t) + sum(log_softmax(x8) * t)
  return s + sum(masked_softmax(x8, v) * t) + sum(cross_entropy(x8, lab) * t[:, 0])

export def fwd_16(x: f32[21, 16])
  v = cast(uniform([21], high = 16.99, seed = 16), i32)
  lab = cast(uniform([21], high = 16.0 - 0.01, seed = 17), i32)
  y = x * 4
  return softmax(y), log_softmax(y), masked_softmax(y, v), cross_entropy(y, lab)

export def loss_16(t: f32[21, 16])
  param x16 : [21, 16] = normal(0, 3)
  v = cast(uniform([21], high = 16.99, seed = 16), i32)
  lab = cast(uniform([21], high = 16.0 - 0.01, seed = 17), i32)
  s = sum(softmax(x16) * t) + sum(log_softmax(x16) * t)
  return s + sum(masked_softmax(x16, v) * t) + sum(cross_entropy(x16, lab) * t[:, 0])

export def fwd_33(x: f32[19, 33])
  v = cast(uniform([19], high = 33.99, seed = 33), i32)
  lab = cast(uniform([19], high = 33.0 - 0.01, seed = 34), i32)
  y = x * 4
  return softmax(y), log_softmax(y), masked_softmax(y, v), cross_entropy(y, lab)

export def loss_33(t: f32[19, 33])
  param x33 : [19, 33] = normal(0, 3)
  v = cast(uniform([19], high = 33.99, seed = 33), i32)
  lab = cast(uniform([19], high = 33.0 - 0.01, seed = 34), i32)
  s = sum(softmax(x33) * t) + sum(log_softmax(x33) * t)
  return s + sum(masked_softmax(x33, v) * t) + sum(cross_entropy(x33, lab) * t[:, 0])

export def fwd_70(x: f32[19, 70])
  v = cast(uniform([19], high = 70.99, seed = 70), i32)
  lab = cast(uniform([19], high = 70.0 - 0.01, seed = 71), i32)
  y = x * 4
  return softmax(y), log_softmax(y), masked_softmax(y, v), cross_entropy(y, lab)

export def loss_70(t: f32[19, 70])
  param x70 : [19, 70] = normal(0, 3)
  v = cast(uniform([19], high = 70.99, seed = 70), i32)
  lab = cast(uniform([19], high = 70.0 - 0.01, seed = 71), i32)
  s = sum(softmax(x70) * t) + sum(log_softmax(x70) * t)
  return s + sum(masked_softmax(x70, v) * t) + sum(cross_entropy(x70, lab) * t[:, 0])

export def fwd_257(x: f32[19, 257])
  v = cast(uniform([19], high = 257.99, seed = 257), i32)
  lab = cast(uniform([19], high = 257.0 - 0.01, seed = 258), i32)
  y = x * 4
  return softmax(y), log_softmax(y), masked_softmax(y, v), cross_entropy(y, lab)

export def loss_257(t: f32[19, 257])
  param x257 : [19, 257] = normal(0, 3)
  v = cast(uniform([19], high = 257.99, seed = 257), i32)
  lab = cast(uniform([19], high = 257.0 - 0.01, seed = 258), i32)
  s = sum(softmax(x257) * t) + sum(log_softmax(x257) * t)
  return s + sum(masked_softmax(x257, v) * t) + sum(cross_entropy(x257, lab) * t[:, 0])
