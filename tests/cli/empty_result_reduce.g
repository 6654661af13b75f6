# Reductions whose result has no elements (x [2, 0] summed over axis 0)
# while a scalar lives beside them in the scratch slab: the JIT wrote
# their init value (0, -inf) past the empty result, into the scalar, and
# out0 came out 0 or -inf instead of equal to a.
model empty_result_reduce

export def f()
  param x : [2, 0] = normal(0, 1)
  param w : [3] = ones
  a = sum(w)
  s = sum(sum(x, axis = 0))
  m = sum(max(x, axis = 0))
  n = sum(mean(x, axis = 0))
  return a + s, a + m, a + n

example f()
