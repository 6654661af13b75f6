# A model for --gradcheck and -c: a cross-attention block (queries from
# the tokens, keys and values from a context of other lengths, masked by
# its valid length) with layer norm, a ReLU feed-forward layer and a
# classifier. Its loss takes inputs and has an example, no data source:
# --gradcheck checks it on the example.
model xattn

dim B

const D = 8, H = 2, F = 16, C = 3, S = 4, K = 5

def attention(x, ctx, valid)
  param W_q, W_k, W_v, W_o : [D, D]
  q = split_heads(x @ W_q, H)
  k = split_heads(ctx @ W_k, H)
  v = split_heads(ctx @ W_v, H)
  w = masked_softmax(q @ k.T / sqrt(D / H), repeat_interleave(valid, H, 0))
  return merge_heads(w @ v, H) @ W_o

def block(x, ctx, valid)
  x = norm(x + attention(x, ctx, valid))
  return norm(x + linear(relu(linear(x, F)), D))

def classify(x, ctx, valid) = linear(mean(block(x, ctx, valid), 1), C)

export def logits(x: f32[B, S, D], ctx: f32[B, K, D], valid: i32[B])
  return classify(x, ctx, valid)

export def loss(x: f32[B, S, D], ctx: f32[B, K, D], valid: i32[B],
                labels: i32[B])
  return mean(cross_entropy(classify(x, ctx, valid), labels))

example logits(normal([3, S, D], seed = 1), normal([3, K, D], seed = 2),
               [5, 2, 3])
example loss(normal([3, S, D], seed = 1), normal([3, K, D], seed = 2),
             [5, 2, 3], [0, 2, 1])

train
  entry = loss
  optimizer = adam(lr = 0.01)
  epochs = 1
