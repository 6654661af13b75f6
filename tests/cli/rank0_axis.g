# A rank-0 tensor takes axis 0 or -1 as PyTorch 1.13's (its dims wrap as
# a rank-1 tensor's): the reductions over it are the value, argmax and
# argmin the index 0, squeeze and transpose the tensor. torch gives
# tensor(0), tensor(0), tensor(30.), tensor(30.), tensor(60.),
# tensor(31.), tensor(0) for s = torch.sum(x * x).
model m

export def forward(x: f32[4])
  s = sum(x * x)
  return argmax(s, 0), argmin(s, -1, true), sum(s, 0), mean(s, [0], true), squeeze(s, -1) * 2.0, transpose(s, 0, -1) + 1.0, argmax(s)
example forward([1.0, 2.0, 3.0, 4.0])
