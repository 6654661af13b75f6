# argmax(x) is PyTorch's torch.argmax(x): without an axis (or with
# axis = None written out, dim=None) the index into the flattened
# tensor, a rank-0 i32 (here 4, the first of the two 0.9s; torch gives
# tensor(4)). It was axis -1 before, which silently differed from torch.
model m

export def forward(x: f32[2, 3], v: f32[4])
  return argmax(x, axis = None), argmax(v, None), argmax(x), argmax(x, -1)
example forward([[0.1, 0.5, -1.0], [0.2, 0.9, 0.9]], [1.0, 3.0, 3.0, 2.0])
