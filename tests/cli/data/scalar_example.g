# scalar_example.g - rank-0 inputs given numbers in the example: each
# number is a rank-0 tensor of its input's dtype (the integer 2 an f32
# 2.0 for u). A number used to be refused ("expected a tensor, got a
# number"), so a function of scalars could not have an example.
model scalar_example

export def f(s: f32[], t: i32[], u: f32[])
  return s * 2.0, t + 1, u - s, cast(t, f32) * s

example f(1.5, -3, 2)
