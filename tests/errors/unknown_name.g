# A name that is defined nowhere.
model m

dim B

export def forward(x: f32[B, 4])
  h = x @ weights
  return h
