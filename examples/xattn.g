# A cross-attention classifier, small enough to train from C
# (examples/train_xattn.c): token ids, embedded, attend over a context of
# other vectors (masked by its valid length); layer norm, a ReLU
# feed-forward layer, then a mean over the tokens and a linear
# classifier. The train block names the loss and its optimizer; the data
# come from the program that links the object `attnc -c` writes (or, for
# --gradcheck, the loss's example).
model xattn

dim B                                  # batch
dim V = 16                             # vocabulary of the tokens

const D = 8, H = 2, F = 16, C = 3, S = 4, K = 5

def attention(x, ctx, valid)
  param W_q, W_k, W_v, W_o : [D, D]
  q = split_heads(x @ W_q, H)                        # (B*H, S, D/H)
  k = split_heads(ctx @ W_k, H)                      # (B*H, K, D/H)
  v = split_heads(ctx @ W_v, H)
  w = masked_softmax(q @ k.T / sqrt(D / H), repeat_interleave(valid, H, 0))
  return merge_heads(w @ v, H) @ W_o

def block(x, ctx, valid)
  x = norm(x + attention(x, ctx, valid))
  return norm(x + linear(relu(linear(x, F)), D))

def classify(tokens, ctx, valid)
  x = embed(tokens, V, D)
  return linear(mean(block(x, ctx, valid), 1), C)

# Class scores (B, C) of each row.
export def logits(tokens: i32[B, S], ctx: f32[B, K, D], valid: i32[B])
  return classify(tokens, ctx, valid)

# Mean cross-entropy of the rows against their labels.
export def loss(tokens: i32[B, S], ctx: f32[B, K, D], valid: i32[B],
                labels: i32[B])
  return mean(cross_entropy(classify(tokens, ctx, valid), labels))

example logits([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 0], [3, 1, 4, 1]],
               normal([4, K, D], seed = 2), [5, 2, 3, 1])
example loss([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 0], [3, 1, 4, 1]],
             normal([4, K, D], seed = 2), [5, 2, 3, 1], [0, 2, 1, 1])

train
  entry = loss
  optimizer = adam(lr = 0.01)
  epochs = 1
