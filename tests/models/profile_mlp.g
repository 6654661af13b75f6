# profile_mlp.g - a model whose kernels can be counted by hand, for the
# tests of --profile (tests/test_codegen_profile.c, tests/profile_cli.sh):
# `forward` is one matmul kernel and one sum kernel that computes the
# relu and the square inside it (elementwise fusion), so a call of it is
# two kernel calls.
model profile_mlp
dim B = 4

export def forward(x: f32[B, 8])
  param W : [8, 16] = normal(0, 0.5)
  h = relu(x @ W)
  return sum(h * h)

example forward(reshape(arange(-1.0, 1.0, 0.0625), [4, 8]))
