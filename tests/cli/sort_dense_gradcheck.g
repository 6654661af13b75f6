# --gradcheck through sort of a dense line: 20,000 normals, neighbours
# ~1e-4 apart, so a step of 1e-4 reorders some. A point is judged only
# at a step where the sort keeps its order (every element's rank the
# same); before, the reordered points were judged and failed (1.2e-4).
model sort_dense_gradcheck

export def loss()
  param a : [1, 20000] = normal(0, 1)
  s = sort(a) * arange(0.0, 20000.0)
  return sum(s * s)

train
  optimizer = sgd(lr = 0.1)
  epochs = 2
