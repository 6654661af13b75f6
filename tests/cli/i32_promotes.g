# exp, sqrt, log, sigmoid, ... of an i32 tensor and true division of one
# give f32, as PyTorch promotes integer tensors (torch.exp(v),
# torch.sqrt(v), v / 2, v / w, torch.sigmoid(v): tensor([ 1.0000,  2.7183,
# 7.3891, 20.0855]), tensor([0.0000, 1.0000, 1.4142, 1.7321]),
# tensor([0.0000, 0.5000, 1.0000, 1.5000]), tensor([-0.0000,  0.2500,
# 1.0000, -3.0000]), tensor([0.5000, 0.7311, 0.8808, 0.9526]));
# abs, neg and relu keep i32, as torch's do.
model m

export def forward(v: i32[4], w: i32[4])
  return exp(v), sqrt(v), v / 2, v / w, sigmoid(v), abs(w)
example forward([0, 1, 2, 3], [-2, 4, 2, -1])
