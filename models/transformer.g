# The Transformer (d2l 10.7): an encoder-decoder of 2 layers, 4 heads,
# width 32, position-wise FFN of 64, dropout 0.1, trained on English-French.
model transformer

dim B                                  # batch
dim V_src = 184, V_tgt = 201           # vocabulary sizes (set by the data)

const D = 32, H = 4, F = 64, L = 2, T = 10, P = 0.1

# Multi-head attention with bias-free projections (d2l MultiHeadAttention).
def attention(queries, keys, values, valid)
  param W_q, W_k, W_v, W_o : [D, D]
  q = split_heads(queries @ W_q, H)                  # (B*H, Q, D/H)
  k = split_heads(keys @ W_k, H)                     # (B*H, K, D/H)
  v = split_heads(values @ W_v, H)
  weights = masked_softmax(q @ k.T / sqrt(D / H), repeat_interleave(valid, H, 0))
  return merge_heads(dropout(weights, P) @ v, H) @ W_o

def add_norm(x, y) = norm(x + dropout(y, P))
def ffn(x) = linear(relu(linear(x, F)), D)

# Token embeddings scaled by sqrt(D) plus positions.
def embed_positions(tokens, vocab)
  return dropout(embed(tokens, vocab, D) * sqrt(D) + positional(T, D), P)

def encoder(src, valid)
  x = embed_positions(src, V_src)
  repeat L
    x = add_norm(x, attention(x, x, x, valid))
    x = add_norm(x, ffn(x))
  return x

def decoder(tgt_in, enc, src_valid)
  x = embed_positions(tgt_in, V_tgt)
  # Teacher forcing: query t may look at steps 0..t only.
  causal = broadcast(reshape(arange(1, T + 1), [1, T]), [size(tgt_in, 0), T])
  repeat L
    x = add_norm(x, attention(x, x, x, causal))
    x = add_norm(x, attention(x, enc, enc, src_valid))
    x = add_norm(x, ffn(x))
  return linear(x, V_tgt)                            # (B, T, V_tgt)

# Logits of every target step given the source and the shifted target.
export def forward(src: i32[B, T], src_valid: i32[B], tgt_in: i32[B, T])
  logits = decoder(tgt_in, encoder(src, src_valid), src_valid)
  return logits

# d2l's loss: per-token cross-entropy masked by the target's valid length,
# averaged over the steps of each sequence, summed over the batch.
export def loss(src: i32[B, T], src_valid: i32[B], tgt_in: i32[B, T],
                tgt: i32[B, T], tgt_valid: i32[B])
  logits = decoder(tgt_in, encoder(src, src_valid), src_valid)
  return sum(masked_ce(logits, tgt, tgt_valid))

# Two padded sentences: <pad> = 1, <bos> = 2, <eos> = 3.
example forward([[9, 4, 3, 1, 1, 1, 1, 1, 1, 1], [12, 20, 4, 3, 1, 1, 1, 1, 1, 1]],
                [3, 4],
                [[2, 15, 5, 3, 1, 1, 1, 1, 1, 1], [2, 30, 41, 7, 5, 3, 1, 1, 1, 1]])

train
  entry = loss
  data = nmt(examples = 600, steps = T)
  batch = 64
  optimizer = adam(lr = 0.005)
  clip = 1
  epochs = 200
