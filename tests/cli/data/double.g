# double.g - an entry whose outputs are named as its inputs, so that
# --outputs of one run is --inputs of the next.
model double

dim N

export def f(a: f32[N, 3], b: i32[N])
  a = a * 2
  b = b + 1
  return a, b
