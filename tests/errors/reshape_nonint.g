# A shape with a dimension that is not an integer.
model m

const D = 10

export def forward(x: f32[2, D])
  return reshape(x, [2, D / 4, 4])
