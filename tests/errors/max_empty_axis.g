# max has no identity: over an axis of no elements into a result that has
# elements it has no value. One error at the op, from the shape rule
# (it came from code generation, prefixed "codegen:").
model max_empty_axis

export def f(x: f32[2, 0])
  return max(x, axis = 1)

example f(zeros([2, 0]))
