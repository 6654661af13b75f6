# A model for the training driver's tests: a bowl whose bottom is known,
# loss = sum((w - t)^2) with t = [-1, 0, 1], from w = [1, 1, 1]. Adam with
# clipping to norm 1 moves each coordinate by about lr per step.
model quadratic

export def loss()
  param w : [3] = ones
  d = w - (arange(3.0) - 1)
  return sum(d * d)

train
  entry = loss
  optimizer = adam(lr = 0.1)
  clip = 1
  epochs = 4
