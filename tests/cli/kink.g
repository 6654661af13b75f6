# A model for --gradcheck's tests: relu at 0, where the derivative the
# compiler uses (0, as PyTorch) and the finite difference (1/2) disagree,
# so the check must fail.
model kink

export def loss()
  param w : [4] = zeros
  return sum(relu(w))
