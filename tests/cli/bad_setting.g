# A train block with a misspelt setting, for the training driver's tests.
model bad_setting

export def loss()
  param w : [1] = ones
  return sum(w * w)

train
  optimizer = sgd(lr = 0.1)
  epoch = 5
