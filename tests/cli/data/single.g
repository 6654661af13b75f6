# single.g - an entry of one input, for --inputs from an .npy (one
# unnamed array) as from a safetensors file.
model single

dim N

export def f(a: f32[N, 3])
  a = a * 2
  return a
