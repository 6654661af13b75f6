# tensors_nofile.g - a classifier whose train block names a samples
# file that is not there: the error points at the data line.
model tensors_nofile

dim B

export def loss(x: f32[B, 4], y: i32[B])
  return mean(cross_entropy(linear(x, 3), y))

train
  data = tensors(file = "nonexistent.safetensors")
  batch = 4
  optimizer = sgd(lr = 0.1)
  epochs = 1
