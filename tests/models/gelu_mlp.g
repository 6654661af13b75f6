# gelu_mlp.g - a two-layer MLP through both of GELU's forms, for the
# tests: its gradient against finite differences
# (tests/test_passes_grad_models.c) and its entry points, fused by the
# code generator, against the interpreter
# (tests/test_codegen_lower_models.c). The data are constants, so `loss`
# is a function of the parameters only.
model gelu_mlp
dim N = 6

def data()
  x = reshape(sin(arange(0.0, 24.0)), [6, 4]) * 2.5
  y = reshape(cos(arange(0.0, 12.0)), [6, 2])
  return x, y

def mlp(x)
  h = linear(x, 8)
  return linear(gelu(h) + gelu(h * 0.5, approximate = "tanh"), 2)

export def forward(x: f32[N, 4])
  return mlp(x)

export def loss()
  x, y = data()
  return mse_loss(mlp(x), y)

example forward(reshape(arange(-3.0, 3.0, 0.25), [6, 4]))
