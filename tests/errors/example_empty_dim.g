# An example whose array gives a symbol the value 0: a dim's value is at
# least 1, and the error says so (it said only "expected f32[2, N]").
model example_empty_dim

dim N

export def f(x: f32[2, N])
  return sum(x)

example f(zeros([2, 0]))
