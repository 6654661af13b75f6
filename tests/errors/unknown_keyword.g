# A keyword argument that the callee does not have.
model m

export def forward(x: f32[2, 8])
  return linear(x, 4, bais = false)
