# cls_wide.g - cls.g expecting 5 features a sample where cls.safetensors
# holds 4: the error names the batch's shape, and its note what a sample
# of the data is.
model cls_wide

dim B

export def loss(x: f32[B, 5], y: i32[B])
  return mean(cross_entropy(linear(x, 3), y))

train
  data = tensors(file = "cls.safetensors")
  batch = 16
  optimizer = adam(lr = 0.01)
  epochs = 1
