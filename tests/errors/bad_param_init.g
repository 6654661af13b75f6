# Parameter initializers that do not exist or do not fit.
model m

def layer(x)
  param W : [size(x, -1), 4] = glorot
  param b : [4] = xavier_uniform
  return x @ W + b

export def forward(x: f32[2, 3]) = layer(x)
