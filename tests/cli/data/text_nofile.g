# text_nofile.g - a text model whose train block names a file that is
# not there: the error points at the data line.
model text_nofile

dim B, V
const T = 8

export def loss(tokens: i32[B, T], targets: i32[B, T])
  return mean(cross_entropy(linear(embed(tokens, V, 8), V), targets))

train
  data = text(file = "nonexistent.txt", steps = T)
  batch = 4
  optimizer = sgd(lr = 0.1)
  epochs = 1
