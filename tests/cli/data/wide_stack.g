# wide_stack.g - a stack of 100 tensors (a deep model's per-layer caches
# stacked are such a list): the frontend builds it as concats of at most
# 32 operands, which the code generator's kernels take. Row i is
# [i, i+1, i+2]; the weighted sum checks every row reached its place.
model wide_stack

export def f()
  param p : [3] = ones
  xs = []
  repeat 100 as i
    xs = xs + [p * arange(3.0) + i]
  s = stack(xs, 0)
  w = reshape(arange(100.0), [100, 1])
  return sum(s * w), s[99:100], concat(xs, 0)[297:300]
