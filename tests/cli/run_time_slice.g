# Learned positions sliced to a run-time length T, which must fit CTX:
# the example binds T = 7 > CTX = 6, reported at the slice when T is
# bound (before anything runs).
model run_time_slice

dim B, T
const CTX = 6

export def forward(x: f32[B, T, 4])
  param wpe : [CTX, 4] = normal(0, 1)
  return x + wpe[0:T]

example forward(ones([2, 7, 4]))
