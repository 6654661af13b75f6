# Every statement and expression form, small.
model syntax
dim B, V = 7
const D = 4, H = 2, S = "fra.txt", R = 0.5e-1

def layer(x, n = D)
  param W : [D, n] = xavier_uniform
  param b : [n] = zeros
  return x @ W + b

def pick(x, flag)
  if flag and not false
    return x[:, 0:2]
  else
    return -x[:, 2:] ** 2

export def f(x: f32[B, D], v: i32[B]) = masked_softmax(layer(x) / sqrt(D), v)

export def g(x: f32[B, D])
  y = x
  repeat 2 as i
    y = relu(layer(y)) * (7 % 3) - y.T.T
  for t in 0..2
    y = y + y[:, t:t+1]
  a = 1
  return pick(y, a < 2)

example f([[1.0, 2, 3, 4]], [2])

train
  entry = f, data = nmt(examples = 10, steps = 5), batch = 2
  optimizer = adam(lr = 0.005), clip = 1, epochs = 2
