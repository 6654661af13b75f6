# PyTorch's gelu refuses an integer tensor ("GeluKernelImpl" not
# implemented for 'Int'), unlike exp or sqrt, which promote it: one
# error that says so, not two about its constants.
model m

export def forward(v: i32[2, 3])
  return gelu(v)
