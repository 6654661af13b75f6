# Characters the language does not use.
model m

export def forward(x: f32[3])
  y = x $ 2
  return y ! 1
