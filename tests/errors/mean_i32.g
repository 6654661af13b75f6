# PyTorch's mean refuses an integer tensor ("mean(): could not infer
# output dtype"), where exp, sqrt and division promote it to f32: so
# does attnc, with the reason and the cast that fixes it.
model m

export def forward(v: i32[4])
  return mean(v)
