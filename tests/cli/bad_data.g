# A train block naming a data source attnc does not provide.
model bad_data

dim B

export def loss(x: f32[B, 3])
  param w : [3] = ones
  return sum(x * w)

train
  data = mnist(batch = 32)
  optimizer = sgd(lr = 0.1)
  epochs = 1
