# The constructors normal(...) and uniform(...) refuse what their
# parameter initializers refuse (and PyTorch's normal_ and uniform_): a
# negative std, a low above high.
model m

export def forward(x: f32[3])
  a = normal([3], std = -1.0)
  b = uniform([3], low = 2.0, high = 1.0)
  return x + a + b
