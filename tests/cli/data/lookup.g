# lookup.g - two lookups of one shape (so they may share one kernel),
# for the tests that a token id out of range at run time is reported at
# the lookup that read it (--inputs lookup_*.safetensors).
model lookup

dim N

export def f(a: i32[N], b: i32[N])
  param E : [4, 2] = normal(0, 1)
  x = embedding(a, E)
  y = embedding(b, E)
  return x + y
