# A model for the training driver's tests: a finite loss and gradient,
# but a learning rate that makes the first update overflow the weight.
model overshoot

export def loss()
  param w : [2] = ones
  return sum(w * 1e30)

train
  optimizer = sgd(lr = 1e10)
  epochs = 2
