# Attributes of the wrong type or out of their range, each reported at
# the argument that gives it (PyTorch refuses each one too): a number for
# a bool, a negative gain, initializer arguments beyond f32, a dropout
# probability of 1 or more, a negative eps, `axis = None` where None
# means no axis, an arange of step 0, a constant beyond f32, a negative
# repetition count.
model m

export def keep(x: f32[2, 3])
  return sum(x, axis = 1, keepdim = 2)

export def gain(x: f32[2, 3])
  param W : [3, 4] = xavier_uniform(gain = -1)
  param V : [3, 4] = normal(mean = 1e39)
  param U : [3, 4] = uniform(-3e38, 3e38)
  return x @ W + x @ V + x @ U

export def drop(x: f32[2, 3])
  return dropout(x, 1.5)

export def eps(x: f32[2, 3])
  return layer_norm(x, ones([3]), zeros([3]), -1e-5)

export def cat(x: f32[2, 3])
  return concat([x, x], axis = None)

export def stacked(x: f32[2, 3])
  return stack([x, x], None)

export def steps(x: f32[2, 3])
  return x + sum(arange(0.0, 3.0, 0))

export def filled(x: f32[2, 3])
  return x + full([2, 3], 1e39)

export def drawn(x: f32[2, 3])
  return x + normal([2, 3], 0, 1e39)

export def drawn_wide(x: f32[2, 3])
  return x + uniform([2, 3], -3e38, 3e38)

export def repeated(x: f32[2, 3])
  return repeat(x, [2, -1])

export def interleaved(x: f32[2, 3])
  return repeat_interleave(x, -1, 0)
