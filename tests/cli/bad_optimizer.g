# A train block naming an optimizer attnc does not have.
model bad_optimizer

export def loss()
  param w : [1] = ones
  return sum(w * w)

train
  optimizer = rmsprop(lr = 0.1)
  epochs = 5
