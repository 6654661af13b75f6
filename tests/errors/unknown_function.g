# A misspelt built-in is answered with the name it is nearest to.
model m

export def f(x: f32[2, 3], v: i32[2])
  return masked_sofmax(x, v)
