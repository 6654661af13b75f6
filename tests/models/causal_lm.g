# A GPT-style character language model whose sequence length T is a
# run-time dimension: learned positions sliced to T (T <= CTX, checked
# when T is bound), causal self-attention through a valid length 1..T per
# query, multi-head split and merge, and a loss over the B*T rows of
# logits. tests/test_models_causal.c runs it at several T under the
# interpreter and the JIT and checks its gradient.
model causal_lm

dim B, T                                # batch, steps (both at run time)

const V = 11, D = 16, H = 2, CTX = 8, L = 2

# Causal multi-head self-attention: query t sees steps 0..t.
def self_attention(x)
  param W_q, W_k, W_v, W_o : [D, D]
  steps = size(x, 1)
  q = split_heads(x @ W_q, H)                        # (B*H, T, D/H)
  k = split_heads(x @ W_k, H)
  v = split_heads(x @ W_v, H)
  causal = broadcast(reshape(arange(1, steps + 1), [1, steps]),
                     [size(q, 0), steps])            # (B*H, T)
  w = masked_softmax(q @ k.T / sqrt(D / H), causal)
  return merge_heads(w @ v, H) @ W_o

def block(x)
  x = x + self_attention(norm(x))
  return x + linear(relu(linear(norm(x), 4 * D)), D)

# Logits (B, T, V) of the next character at every step.
def logits(tokens)
  param wpe : [CTX, D] = normal(0, 0.5)
  x = embed(tokens, V, D) + wpe[0:size(tokens, 1)]
  repeat L
    x = block(x)
  return linear(norm(x), V)

# Mean next-character cross-entropy over the B*T rows.
export def loss(tokens: i32[B, T], targets: i32[B, T])
  rows = reshape(logits(tokens), [B * T, V])
  return mean(cross_entropy(rows, reshape(targets, [B * T])))

# d2l's masked loss over each sequence's first valid steps, (B,).
export def masked_loss(tokens: i32[B, T], targets: i32[B, T], valid: i32[B])
  return masked_ce(logits(tokens), targets, valid)

example loss([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]],
             [[2, 3, 4, 5, 6], [7, 8, 9, 10, 0]])

# Trains on its example (one batch an epoch): the loss falls.
train
  optimizer = adam(lr = 0.01)
  epochs = 40
