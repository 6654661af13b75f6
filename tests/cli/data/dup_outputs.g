# dup_outputs.g - outputs whose names would repeat: a variable returned
# twice, and a variable named as an unnamed output is. Each output keeps
# its variable's name unless an earlier one has it, then outI (then
# outI_K), so --outputs can write them all by name.
model dup_outputs

export def f(x: f32[3])
  y = x * 2
  out1 = x - 1
  out3 = x * x
  return y, y, out1, x + 1, out3

example f([1.0, 2.0, 3.0])
