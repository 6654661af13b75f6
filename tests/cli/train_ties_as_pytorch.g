# Gradients at kinks and ties, trained as PyTorch 1.13 trains the same
# model (SGD, lr 0.1, the example as one batch an epoch). The rows of
# x @ W (W all ones) are equal across a row, so every max, maximum,
# minimum, sort, relu and abs below meets a tie or its kink, where a
# framework chooses a subgradient: PyTorch's amax and maximum/minimum
# split the gradient evenly among equal values, relu and abs take 0.
# PyTorch's losses, epochs 1-6: 0.7250 0.7145 0.7019 0.6944 0.6761
# 0.6583 (giving every tie to its first index instead: 0.7250 0.7136
# 0.7064 0.6877 0.6696 0.6521).
model ties
dim B

export def loss(x: f32[B, 4], z: f32[B, 4])
  param W : [4, 4] = ones
  param s : [4] = ones
  h = x @ W
  a = relu(h - 2) + abs(h - 2) + maximum(h, s * 2) + minimum(h * s, 2)
  m = max(h * s, axis = -1, keepdim = true) + max(a, axis = 0, keepdim = true)
  return mean(m * z) + mean(sort(h * s) * z)

example loss([[0.5, 0.5, 0.5, 0.5], [1, 0, 1, 0], [0.25, 0.25, 0, 0],
              [2, 0, 0, 0], [0, 0, 0, 0], [1, 1, 0, 0]],
             reshape(arange(24.0), [6, 4]) / 10 - 1)

train
  optimizer = sgd(lr = 0.1)
  epochs = 6
