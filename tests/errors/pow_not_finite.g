# A power of numbers that is no finite number is an error, as sqrt(-1)
# is, rather than a NaN or infinity in every output.
model pow_not_finite

const SCALE = (-8) ** 0.5

export def f(x: f32[2])
  return x * SCALE

example f([1.0, 2.0])
