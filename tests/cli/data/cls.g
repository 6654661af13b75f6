# cls.g - a small classifier written for the tests of data = tensors(...):
# three classes of points in 4-D, an MLP, the mean cross-entropy.
model cls

dim B

export def loss(x: f32[B, 4], y: i32[B])
  h = relu(linear(x, 16))
  return mean(cross_entropy(linear(h, 3), y))

train
  data = tensors(file = "cls.safetensors", valid = 0.2)
  batch = 16
  optimizer = adam(lr = 0.01)
  epochs = 4
