# A loop shares its call site's parameters, so their shapes must agree.
model m

def cell(x)
  param W : [size(x, -1), 8]
  return x @ W

export def forward(x: f32[2, 4])
  for t in 0..2
    x = cell(x)
  return x
