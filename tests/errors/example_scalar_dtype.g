# A number for a rank-0 input: a real one cannot be an i32 input's.
model m

export def f(s: f32[], t: i32[])
  return cast(t, f32) * s

example f(2, 1.5)
