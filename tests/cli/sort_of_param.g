# sort's gradient: each sorted element's gradient goes back to the
# element it came from (sort_grad). Along the last axis and, through a
# permute, along the first; checked against central differences in
# float64 (a gradient of 0 through sort, as before it had one, fails).
model sort_of_param

export def loss()
  param a : [2, 3] = normal(0, 1)
  s = sort(a * 3) * [1.0, 2.0, 3.5]
  t = sort(permute(a, [1, 0])) * [-1.0, 0.5]
  return sum(s * s) + sum(t)

train
  optimizer = sgd(lr = 0.1)
  epochs = 2
