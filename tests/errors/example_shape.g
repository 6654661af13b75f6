# Example inputs whose shapes disagree with the declared types.
model m

dim B

export def forward(x: f32[B, 4], valid: i32[B])
  return masked_softmax(reshape(x, [size(x, 0), 1, 4]), valid)

example forward(ones([2, 4]), [3, 1, 2])
