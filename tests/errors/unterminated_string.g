# A string without its closing quote.
model m

export def loss(x: f32[3]) = sum(x)

train
  entry = loss
  data = "fra.txt
  epochs = 3
