# Inner dimensions of a matmul that do not agree.
model m

dim B

export def forward(q: f32[B, 5, 8], k: f32[B, 7, 6])
  scores = q @ k.T
  return scores
