# An i32 tensor beside an f32 tensor or a real number becomes f32 first,
# as PyTorch's type promotion: v + x, v * 0.5, v > 0.5, maximum(v, x),
# where(v > 1, v, x), v - 1, where(v > 1, v, 0.5), pow(v, 0.5) give
# torch's tensor([1.5000, 2.2500, 7.0000]), tensor([0.5000, 1.0000,
# 1.5000]), tensor([True, True, True]), tensor([1., 2., 4.]),
# tensor([0.5000, 2.0000, 3.0000]), tensor([0, 1, 2], dtype=torch.int32),
# tensor([0.5000, 2.0000, 3.0000]), tensor([1.0000, 1.4142, 1.7321]).
model m

export def forward(v: i32[3], x: f32[3])
  return v + x, v * 0.5, v > 0.5, maximum(v, x), where(v > 1, v, x), v - 1, where(v > 1, v, 0.5), pow(v, 0.5)
example forward([1, 2, 3], [0.5, 0.25, 4.0])
