# epilogue.g - two matmuls whose adds the sgemm's epilogue computes, for
# tests/test_codegen_epilogue.c: h's bias add (h is read by a matmul, so
# the add keeps a kernel of its own) and net's residual add (returned by
# forward); loss_masked's gradient, where one of them may not be; and
# two adds in a row after a product, both in its epilogue (chain).
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

# A masked loss's gradient g (rows of it zero at padding) reaches h as
# the sum of (g Wc^T) Wb^T and g Wa^T: the add keeps a kernel (matmuls
# read it), and its matmuls leave out the zero rows of g and of g Wc^T
# (skip_zero_m), which the sgemm's epilogue does not take; x (B, 16, 32)
# makes each a folded batch.
export def loss_masked(x: f32[B, 16, 32], targets: i32[B, 16])
  param W0 : [32, 32] = normal(0, 0.3)
  param Wa : [32, 10] = normal(0, 0.3)
  param Wb : [32, 32] = normal(0, 0.3)
  param Wc : [32, 10] = normal(0, 0.3)
  h = x @ W0
  logits = (h @ Wb) @ Wc + h @ Wa
  return mean(cross_entropy(reshape(logits, [B * 16, 10]), reshape(targets, [B * 16])))

# A loss masked past each valid length, through a residual add and a
# relu: the zero rows of its gradient (every padding position) reach each
# matmul of the backward pass, which leaves them out.
export def loss_padded(x: f32[B, 16, 32], targets: i32[B, 16], valid: i32[B])
  param Wp : [32, 32] = normal(0, 0.3)
  param Wq : [32, 32] = normal(0, 0.3)
  param Wr : [32, 10] = normal(0, 0.3)
  h = relu(x @ Wp)
  z = h @ Wq + h
  return sum(masked_ce(z @ Wr, targets, valid))

# A padded loss through layer norms, 24 sequences of 16 (384 rows: two
# k-blocks of the weights' gradients X^T dY): each norm's gradient keeps
# the zero rows of the loss's (every padding position), and the matmuls
# of the backward pass leave them out.
export def loss_normed(x: f32[24, 16, 32], targets: i32[24, 16], valid: i32[24])
  param Wp : [32, 32] = normal(0, 0.3)
  param Wq : [32, 32] = normal(0, 0.3)
  param Wr : [32, 10] = normal(0, 0.3)
  h = norm(relu(x @ Wp))
  z = norm(h @ Wq + h)
  return sum(masked_ce(z @ Wr, targets, valid))

# Two adds in a row after a product: a bias then a residual, as a
# transformer's MLP output joins its input (y), and a sum of three
# products of different operands, as the input gradient of the
# projections q, k and v (products of one operand would be factored).
# Each first add is read only by the second, which computes it; the
# sgemm's epilogue adds both terms.
def chain(x)
  param W3 : [32, 32] = normal(0, 0.3)
  param b3 : [32] = normal(0, 0.3)
  param Wd : [32, 32] = normal(0, 0.3)
  param We : [32, 32] = normal(0, 0.3)
  param Wf : [32, 32] = normal(0, 0.3)
  y = x + (x @ W3 + b3)
  return (x @ Wd + y @ We) + relu(y) @ Wf

export def forward_chain(x: f32[B, 16, 32])
  return chain(x)

export def loss_chain(x: f32[B, 16, 32])
  z = chain(x)
  return mean(z * z)
