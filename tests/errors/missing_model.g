# A file must begin by naming its model.
def f(x) = x
