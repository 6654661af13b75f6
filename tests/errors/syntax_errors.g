# Several syntax errors: each is reported, and parsing goes on at the
# next line.
model broken

const D = 4 +
def f(x)
  y = x * * 2
  return y ]
export def g(x: f32[D]
  return x
const E = (1, 2)
