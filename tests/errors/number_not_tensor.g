# A number where a tensor is needed, and a def used without calling it.
model m

export def forward(x: f32[3])
  a = softmax(2.5)
  b = x + relu
  return a
