# A model for --gradcheck's tests: relu(w - c) from w = 0 is at its kink
# in coordinates 0 and 3 (c = 0 there) and smooth in 1 and 2, so the
# check skips two coordinates (and every direction, which crosses them)
# and judges the other two.
model kink_partial

export def loss()
  param w : [4] = zeros
  return sum(relu(w - [0.0, 0.5, -0.5, 0.0]))
