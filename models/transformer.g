# The Transformer (d2l 10.7): an encoder-decoder of 2 layers, 4 heads,
# width 32, position-wise FFN of 64, dropout 0.1, trained on English-French.
model transformer

dim B                                  # batch
dim V_src = 184, V_tgt = 201           # vocabulary sizes (set by the data)

const D = 32, H = 4, F = 64, L = 2, T = 10, P = 0.1

# Multi-head attention with bias-free projections (d2l MultiHeadAttention).
# Returns the output (B, Q, D) and the weights (B*H, Q, K).
def attention(queries, keys, values, valid)
  param W_q, W_k, W_v, W_o : [D, D]
  q = split_heads(queries @ W_q, H)                  # (B*H, Q, D/H)
  k = split_heads(keys @ W_k, H)                     # (B*H, K, D/H)
  v = split_heads(values @ W_v, H)
  weights = masked_softmax(q @ k.T / sqrt(D / H), repeat_interleave(valid, H, 0))
  return merge_heads(dropout(weights, P) @ v, H) @ W_o, weights

def add_norm(x, y) = norm(x + dropout(y, P))
def ffn(x) = linear(relu(linear(x, F)), D)

# Token embeddings scaled by sqrt(D) plus the positions' encodings (T, D)
# or, for one decoding step, (1, D).
def embed_positions(tokens, vocab, positions)
  return dropout(embed(tokens, vocab, D) * sqrt(D) + positions, P)

# Encoder output (B, T, D) and each layer's self-attention weights.
def encoder(src, valid)
  x = embed_positions(src, V_src, positional(T, D))
  weights = []
  repeat L
    y, w = attention(x, x, x, valid)
    x = add_norm(x, y)
    x = add_norm(x, ffn(x))
    weights = weights + [w]
  return x, weights

# The decoder, written once for both of its uses (as d2l's
# TransformerDecoder): teacher-forced training over all T steps with a
# causal mask, or one greedy decoding step at position pos, where each
# layer attends over a cache (B, T, D) of its inputs at the steps so far
# (kv: one cache per layer; rows past pos are masked out).
def decoder(tokens, enc, src_valid, is_step = false, pos = None, kv = [])
  batch = size(tokens, 0)
  positions = positional(T, D)
  if is_step
    at_pos = reshape(cast(arange(T) == pos, f32), [1, T, 1])   # one-hot row
    positions = reshape(at_pos, [1, T]) @ positions               # (1, D)
  x = embed_positions(tokens, V_tgt, positions)
  new_kv = []
  self_weights = []
  cross_weights = []
  repeat L as l
    keys = x
    # Training: query t may look at steps 0..t only.
    valid = broadcast(reshape(arange(1, T + 1), [1, T]), [batch, T])
    if is_step
      keys = kv[l] * (1 - at_pos) + x * at_pos
      new_kv = new_kv + [keys]
      valid = broadcast(pos + 1, [batch])
    y, w_self = attention(x, keys, keys, valid)
    x = add_norm(x, y)
    y, w_cross = attention(x, enc, enc, src_valid)
    x = add_norm(x, y)
    x = add_norm(x, ffn(x))
    self_weights = self_weights + [w_self]
    cross_weights = cross_weights + [w_cross]
  return linear(x, V_tgt), new_kv, self_weights, cross_weights

# Logits of every target step given the source and the shifted target.
export def forward(src: i32[B, T], src_valid: i32[B], tgt_in: i32[B, T])
  enc, enc_weights = encoder(src, src_valid)
  logits, kv, self_weights, cross_weights = decoder(tgt_in, enc, src_valid)
  return logits

# d2l's loss: per-token cross-entropy masked by the target's valid length,
# averaged over the steps of each sequence, summed over the batch.
export def loss(src: i32[B, T], src_valid: i32[B], tgt_in: i32[B, T],
                tgt: i32[B, T], tgt_valid: i32[B])
  enc, enc_weights = encoder(src, src_valid)
  logits, kv, self_weights, cross_weights = decoder(tgt_in, enc, src_valid)
  return sum(masked_ce(logits, tgt, tgt_valid))

# Greedy decoding: encode once; then one token at a time, carrying each
# layer's cache. The weights are for the book's heatmaps: encoder
# self-attention (L, B*H, T, T), and per step the decoder's self- and
# encoder-decoder attention (L, B*H, 1, T).
export def encode(src: i32[B, T], src_valid: i32[B])
  enc, layer_weights = encoder(src, src_valid)
  weights = stack(layer_weights, 0)
  return enc, weights

export def decode_step(tok: i32[B, 1], pos: i32[1], enc: f32[B, T, D],
                       src_valid: i32[B], kv: f32[L, B, T, D])
  caches = []
  for l in 0..L
    caches = caches + [kv[l]]
  logits, layer_kv, layer_self, layer_cross = decoder(tok, enc, src_valid, true, pos, caches)
  kv = stack(layer_kv, 0)
  self_weights = stack(layer_self, 0)
  cross_weights = stack(layer_cross, 0)
  return logits, kv, self_weights, cross_weights

# Two padded sentences: <pad> = 1, <bos> = 2, <eos> = 3.
example forward([[9, 4, 3, 1, 1, 1, 1, 1, 1, 1], [12, 20, 4, 3, 1, 1, 1, 1, 1, 1]],
                [3, 4],
                [[2, 15, 5, 3, 1, 1, 1, 1, 1, 1], [2, 30, 41, 7, 5, 3, 1, 1, 1, 1]])

train
  entry = loss
  data = nmt(examples = 600, steps = T)
  batch = 64
  shards = 2                           # two halves of 32 rows, a thread each
  optimizer = adam(lr = 0.005)
  clip = 1
  epochs = 200
