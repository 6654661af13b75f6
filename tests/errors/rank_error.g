# Valid lengths of the wrong rank for a masked softmax.
model m

dim B

export def forward(scores: f32[B, 3, 4], valid: i32[B, 3, 4])
  return masked_softmax(scores, valid)
