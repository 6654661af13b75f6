# T + 1 bounds an arange or a slice, but a shape's dims are multiples of
# one symbol.
model m

dim T

export def forward(x: f32[T, 4])
  return broadcast(x, [T + 1, 4])
