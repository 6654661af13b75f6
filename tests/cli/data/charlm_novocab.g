# charlm_novocab.g - a text model whose vocabulary is a number, not the
# dim V that text(...) binds.
model charlm_novocab

dim B
const T = 4

export def loss(tokens: i32[B, T], targets: i32[B, T])
  return mean(cross_entropy(embed(tokens, 16, 16), targets))

train
  data = text(steps = T)
  batch = 2
  optimizer = adam
  epochs = 1
