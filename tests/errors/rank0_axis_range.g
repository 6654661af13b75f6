# A rank-0 tensor takes axis 0 or -1 only, once (PyTorch 1.13: "dim 0
# appears multiple times in the list of dims").
model m

export def forward(x: f32[4])
  s = sum(x)
  return sum(s, [0, -1])
