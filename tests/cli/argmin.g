# argmin as PyTorch 1.13's torch.argmin, and argmax beside it: no axis is
# the index into the flattened tensor; the first of equal values wins;
# keepdim as torch's. torch gives tensor(4), tensor([1, 0]),
# tensor([[1, 0, 1, 1]]), tensor(1), tensor(4), tensor([[4]]), tensor(0).
model m

export def forward(x: f32[2, 4], v: i32[5])
  return argmin(x), argmin(x, axis = 1), argmin(x, 0, keepdim = true), argmin(v), argmax(v), argmin(x, keepdim = true), argmax(x, -1, false)[0]
example forward([[3.0, 0.0, 0.0, 2.0], [-1.0, 4.0, -1.0, 0.5]],
                [7, -2147483647 - 1, 5, -2147483647 - 1, 2147483647])
