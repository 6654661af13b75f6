# A model for --gradcheck's tests: the kinks of max, maximum, abs and a
# divisor. w = ones makes every row of max(w, 1) a tie, so each of its
# coordinates is at a kink and skipped; v, drawn away from 0 and from
# 0.25 v + 0.1, is smooth and judged.
model kink_max

export def loss()
  param w : [2, 3] = ones
  param v : [2, 3] = uniform(low = 0.5, high = 1)
  tie = sum(max(w, 1))
  return tie + sum(maximum(v, 0.25 * v + 0.1)) + sum(abs(v) / (v * v - 4))
