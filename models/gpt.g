# gpt.g - a decoder-only character-level language model in the style of
# GPT-2 (Radford et al. 2019; Karpathy's nanoGPT): token and learned
# position embeddings, L pre-LN blocks of causal multi-head
# self-attention and a GELU MLP, a final layer norm and a linear head.
# It trains on a text's characters (data = text(...): the built-in
# stories by default, or --data FILE), and generates with a cache of
# each layer's keys and values (decode_step; attnc --generate "PROMPT").
model gpt

dim B, T                               # batch, steps (T <= CTX, at run time)
dim V = 60                             # vocabulary: the text's characters

# width, heads, blocks, MLP width, context (the most steps), dropout
const D = 64, H = 4, L = 2, F = 256, CTX = 64, P = 0.1

# Causal self-attention over x (B, S, D). In training S = T and query t
# sees keys 0..t; in a decoding step S = 1 at position pos and the keys
# and values are the cache's (B, CTX, D) rows 0..pos, this step's written
# at pos (at: (1, CTX, 1), one at pos). Returns the output and this
# layer's keys and values for the cache.
def attention(x, is_step, at, pos, cache)
  param W_q, W_k, W_v, W_o : [D, D] = normal(0, 0.02)
  q = x @ W_q
  k = x @ W_k
  v = x @ W_v
  batch = size(x, 0)
  steps = size(x, 1)
  valid = broadcast(reshape(arange(1, steps + 1), [1, steps]), [batch, steps])
  if is_step
    k = cache[0] * (1 - at) + k * at
    v = cache[1] * (1 - at) + v * at
    valid = broadcast(pos + 1, [batch])
  w = masked_softmax(split_heads(q, H) @ split_heads(k, H).T / sqrt(D / H),
                     repeat_interleave(valid, H, 0))
  y = merge_heads(dropout(w, P) @ split_heads(v, H), H) @ W_o
  return y, stack([k, v], 0)

# nn.GELU (exact, from erf), as the MLP of GPT-2 blocks.
def mlp(x) = linear(gelu(linear(x, F)), D)

# Logits (B, S, V) and the new cache (L, 2, B, CTX, D) (unused in
# training).
def gpt(tokens, is_step = false, pos = None, kv = None)
  param wpe : [CTX, D] = normal(0, 0.02)
  positions = wpe[0:size(tokens, 1)]             # (T, D): the first T rows
  at = None
  if is_step
    at = reshape(cast(arange(CTX) == pos, f32), [1, CTX, 1])
    positions = reshape(at, [1, CTX]) @ wpe        # (1, D): the row at pos
  x = dropout(embed(tokens, V, D) + positions, P)
  caches = []
  repeat L as l
    cache = None
    if is_step
      cache = kv[l]
    y, layer_kv = attention(norm(x), is_step, at, pos, cache)
    x = x + dropout(y, P)
    x = x + dropout(mlp(norm(x)), P)
    caches = caches + [layer_kv]
  return linear(norm(x), V), stack(caches, 0)

# The mean next-character cross-entropy over the B*T steps.
export def loss(tokens: i32[B, T], targets: i32[B, T])
  logits, kv = gpt(tokens)
  return mean(cross_entropy(reshape(logits, [B * T, V]), reshape(targets, [B * T])))

# One token a row at position pos, with the cache of the steps before.
export def decode_step(tok: i32[B, 1], pos: i32[1], kv: f32[L, 2, B, CTX, D])
  logits, kv = gpt(tok, true, pos, kv)
  return logits, kv

train
  data = text(steps = CTX, valid = 0.1, stride = 8)
  batch = 32
  optimizer = adam(lr = 0.01)
  clip = 1
  epochs = 5
