# A list grown by copying in a long loop passes elaboration's 256 MiB of
# lists: one error at the growing line, and no second one at the call
# for the function that stopped before its return.
model m

def f(x)
  xs = []
  repeat 100000 as i
    xs = xs + [x]
  return xs[0]

export def g(x: f32[3])
  return f(x)
