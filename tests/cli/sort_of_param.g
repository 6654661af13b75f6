# sort has no gradient: a loss that depends on a parameter through it is
# an error when autodiff builds the gradient, not a gradient of 0 that
# trains nothing (and that only --gradcheck would catch).
model sort_of_param

export def loss()
  param a : [2, 3] = normal(0, 1)
  return sum(sort(a * 3) * [1.0, 2.0, 3.5])

train
  optimizer = sgd(lr = 0.1)
  epochs = 2
