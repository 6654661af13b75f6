# --gradcheck through sort of lines with ties ([1, 1, 2] twice): any move
# of a tied element reorders its line, a kink, so those points are
# skipped; the untied third elements are judged. Before, the tied points
# were judged and failed (0.6).
model sort_ties_gradcheck

export def loss()
  param b : [2, 3] = ones
  t = sort(b * [1.0, 1.0, 2.0]) * [1.0, 2.0, 3.5]
  return sum(t * t)

train
  optimizer = sgd(lr = 0.1)
  epochs = 2
