# A model for the training driver's tests: a learning rate far too large
# makes the second step's loss overflow float32, which must stop training
# at the op where the infinity first appears.
model diverge

export def loss()
  param w : [1] = ones
  sq = w * w
  return sum(sq)

train
  optimizer = sgd(lr = 1e20)
  epochs = 3
