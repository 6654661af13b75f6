# remat_mlp.g - three pre-norm residual blocks of a GELU MLP, 256 wide,
# over 512 rows, for the tests of the remat pass
# (tests/test_codegen_sched.c): its gradient recomputes each block's
# layer norm before the weight gradient that reads it, instead of
# keeping it from the forward (GELU's output, with its erf, it keeps).
# The data are constants.
model remat_mlp
const D = 256, F = 512, L = 3

def block(x) = x + linear(gelu(linear(norm(x), F)), D)

export def loss()
  x = reshape(sin(arange(0.0, 131072.0)), [512, D])
  y = reshape(cos(arange(0.0, 131072.0)), [512, D])
  repeat L
    x = block(x)
  return mse_loss(x, y)
