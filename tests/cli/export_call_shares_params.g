# An exported function called from another uses the parameters it has as
# an entry point, as a PyTorch loss calls the model's forward: `loss`
# trains the weights `logits` then predicts with (2 parameters, not 4:
# the call in `loss` made its own `logits.linear.W` and `logits.linear.b`).
model m
dim B

export def logits(x: f32[B, 3])
  return linear(x, 2)

export def loss(x: f32[B, 3], y: i32[B])
  return mean(cross_entropy(logits(x), y))
