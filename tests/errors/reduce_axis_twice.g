# An axis named twice in a reduction's list, as 1 and -1 of a rank-2
# tensor, is an error (PyTorch: "dim 1 appears multiple times in the
# list of dims"), not one reduction over it.
model m

export def forward(x: f32[2, 3])
  return sum(x, axis = [1, -1])
