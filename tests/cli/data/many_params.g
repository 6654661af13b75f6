# many_params.g - a training run of 1,100 parameters (a 92-layer GPT has
# as many tensors): the loss and a gradient for each are 1,101 outputs of
# loss_grad, which training takes. loss = sum over i of (i + 1) w_i^2,
# from w_i = 1: 605,550 at first.
model many_params

def term(i)
  param w : [1] = ones
  return sum(w * w) * (i + 1)

export def loss()
  s = term(0)
  repeat 1099 as i
    s = s + term(i + 1)
  return s

train
  entry = loss
  optimizer = sgd(lr = 0.001)
  epochs = 2
