# Sequence to sequence with Bahdanau attention (d2l 10.4): a 2-layer GRU
# encoder, and a 2-layer GRU decoder that, at every step, attends over the
# encoder's outputs with additive attention, queried by its last state.
model bahdanau

dim B                                  # batch
dim V_src = 184, V_tgt = 201           # vocabulary sizes (set by the data)

const E = 32, Hd = 32, L = 2, T = 10, P = 0.1

# d2l AdditiveAttention(num_hiddens, dropout), bias-free projections.
def additive_attention(queries, keys, values, valid)
  param W_q : [size(queries, -1), Hd]
  param W_k : [size(keys, -1), Hd]
  param w_v : [Hd, 1]
  features = tanh(unsqueeze(queries @ W_q, 2) + unsqueeze(keys @ W_k, 1))
  weights = masked_softmax(squeeze(features @ w_v, -1), valid)    # (B, Q, K)
  return dropout(weights, P) @ values, weights

# One time step through the L stacked GRU layers, with dropout between
# layers as nn.GRU(dropout=P) does. hs: a list of L states (B, Hd).
def gru_stack(x, hs)
  out = []
  repeat L as l
    h = gru_cell(x, hs[l], Hd)
    out = out + [h]
    if l < L - 1
      x = dropout(h, P)
  return out

# Encoder outputs (B, T, Hd) and the final states of the L layers.
def encoder(src)
  x = embed(src, V_src, E)                           # (B, T, E)
  h0 = broadcast(zeros([1, Hd]), [size(src, 0), Hd])
  hs = []
  for l in 0..L
    hs = hs + [h0]
  outs = []
  for t in 0..T
    hs = gru_stack(x[:, t], hs)
    outs = outs + [hs[L - 1]]
  return stack(outs, 1), hs

# d2l Seq2SeqAttentionDecoder.forward over tokens (B, S) from states hs;
# also the attention weights over the source at each step (B, S, T).
def decoder(tokens, hs, enc, src_valid)
  x = embed(tokens, V_tgt, E)                        # (B, S, E)
  outs = []
  weights = []
  for t in 0..size(tokens, 1)
    query = unsqueeze(hs[L - 1], 1)                  # (B, 1, Hd)
    context, w = additive_attention(query, enc, enc, src_valid)
    hs = gru_stack(concat([squeeze(context, 1), x[:, t]], -1), hs)
    outs = outs + [hs[L - 1]]
    weights = weights + [w]
  return linear(stack(outs, 1), V_tgt), hs, concat(weights, 1)

export def forward(src: i32[B, T], src_valid: i32[B], tgt_in: i32[B, T])
  enc, hs = encoder(src)
  logits, hs, weights = decoder(tgt_in, hs, enc, src_valid)
  return logits

export def loss(src: i32[B, T], src_valid: i32[B], tgt_in: i32[B, T],
                tgt: i32[B, T], tgt_valid: i32[B])
  enc, hs = encoder(src)
  logits, hs, weights = decoder(tgt_in, hs, enc, src_valid)
  return sum(masked_ce(logits, tgt, tgt_valid))

# Greedy decoding: encode once, then one token at a time with the state.
export def encode(src: i32[B, T])
  enc, hs = encoder(src)
  return enc, stack(hs, 0)                           # (B, T, Hd), (L, B, Hd)

export def decode_step(tok: i32[B, 1], state: f32[L, B, Hd],
                       enc: f32[B, T, Hd], src_valid: i32[B])
  hs = []
  for l in 0..L
    hs = hs + [state[l]]
  logits, hs, weights = decoder(tok, hs, enc, src_valid)
  # (B, 1, V_tgt), (L, B, Hd), and the attention over the source (B, 1, T)
  return logits, stack(hs, 0), weights

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
  epochs = 250
