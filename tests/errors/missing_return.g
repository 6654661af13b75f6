# The value of a def that returns nothing is used.
model m

def project(x)
  y = x * 2

export def forward(x: f32[3])
  return project(x) + 1
