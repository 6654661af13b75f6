# A model for the training driver's tests: sqrt's gradient at 0 is
# infinite while the loss is finite, so training must stop at the op
# whose gradient overflows.
model sqrt_at_zero

export def loss()
  param w : [2] = zeros
  r = sqrt(w)
  return sum(r)

train
  optimizer = sgd(lr = 0.1)
  epochs = 2
