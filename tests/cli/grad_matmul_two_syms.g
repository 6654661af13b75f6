# A loss whose input has two run-time dims in front of a matmul with a
# weight, and which never writes their product (B * N) itself: the
# weight's gradient flattens x to [-1, D], which autodiff must give the
# product symbol (it used to fail: "reshape: cannot reshape [B, N, 8] to
# [-1, 8]"). The second matmul has three (B * N * M).
model grad_matmul_two_syms

dim B, N, M

const D = 8

export def loss(x: f32[B, N, D], z: f32[B, N, M, D])
  param W, U : [D, D]
  return mean(relu(x @ W)) + mean(z @ U)

example loss(normal([2, 3, D], seed = 1), normal([2, 3, 2, D], seed = 2))

train
  optimizer = adam(lr = 0.01)
  epochs = 1
