# Token ids (i32) where a float tensor is needed.
model m

dim B, T

export def forward(ids: i32[B, T])
  return softmax(ids)
