# argmax without an axis flattens, as torch.argmax(x): a tensor of two
# run-time sizes cannot be flattened here, so the axis must be given.
model m

dim B, T

export def forward(x: f32[B, T, 5])
  return argmax(x)
