# A model that declares a dimension nothing uses (N): -c needs no value
# for it, as --jit does not, and the header does not list it.
model unused_dim
dim B, N
export def f(x: f32[B, 4])
  return x * 2
