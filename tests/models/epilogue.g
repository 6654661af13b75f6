# epilogue.g - two matmuls whose adds the sgemm's epilogue computes, for
# tests/test_codegen_epilogue.c: h's bias add (h is read by a matmul, so
# the add keeps a kernel of its own) and net's residual add (returned by
# forward).
model epilogue
dim B = 4

def net(x)
  param W1 : [32, 96] = normal(0, 0.3)
  param b1 : [96] = normal(0, 0.3)
  param W2 : [96, 32] = normal(0, 0.3)
  h = x @ W1 + b1
  return h @ W2 + x

export def forward(x: f32[B, 16, 32])
  return net(x)

export def loss(x: f32[B, 16, 32])
  y = net(x)
  return mean(y * y)
