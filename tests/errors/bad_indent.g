# A dedent to a column no block was opened at.
model m

def f(x)
    y = x + 1
  return y
