# Indentation by spaces in one block and by a tab in another.
model m

def f(x)
  return x

def g(x)
	return x
