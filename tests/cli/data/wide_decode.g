# wide_decode.g - a character model whose decode_step carries 64
# states: 66 inputs and 65 outputs, past what --generate reads
# (DRV_MAX_INPUTS, 64), which it says at decode_step's line.
model wide_decode

dim B, V
const D = 8, T = 8

def logits_of(tokens)
  return linear(embed(tokens, V, D), V)

export def loss(tokens: i32[B, T], targets: i32[B, T])
  return mean(cross_entropy(logits_of(tokens), targets))

export def decode_step(tok: i32[B, 1], pos: i32[1],
  s0: f32[B, 1], s1: f32[B, 1], s2: f32[B, 1], s3: f32[B, 1], s4: f32[B,
  1], s5: f32[B, 1], s6: f32[B, 1], s7: f32[B, 1], s8: f32[B, 1], s9:
  f32[B, 1], s10: f32[B, 1], s11: f32[B, 1], s12: f32[B, 1], s13: f32[B,
  1], s14: f32[B, 1], s15: f32[B, 1], s16: f32[B, 1], s17: f32[B, 1], s18:
  f32[B, 1], s19: f32[B, 1], s20: f32[B, 1], s21: f32[B, 1], s22: f32[B,
  1], s23: f32[B, 1], s24: f32[B, 1], s25: f32[B, 1], s26: f32[B, 1], s27:
  f32[B, 1], s28: f32[B, 1], s29: f32[B, 1], s30: f32[B, 1], s31: f32[B,
  1], s32: f32[B, 1], s33: f32[B, 1], s34: f32[B, 1], s35: f32[B, 1], s36:
  f32[B, 1], s37: f32[B, 1], s38: f32[B, 1], s39: f32[B, 1], s40: f32[B,
  1], s41: f32[B, 1], s42: f32[B, 1], s43: f32[B, 1], s44: f32[B, 1], s45:
  f32[B, 1], s46: f32[B, 1], s47: f32[B, 1], s48: f32[B, 1], s49: f32[B,
  1], s50: f32[B, 1], s51: f32[B, 1], s52: f32[B, 1], s53: f32[B, 1], s54:
  f32[B, 1], s55: f32[B, 1], s56: f32[B, 1], s57: f32[B, 1], s58: f32[B,
  1], s59: f32[B, 1], s60: f32[B, 1], s61: f32[B, 1], s62: f32[B, 1], s63:
  f32[B, 1])
  return logits_of(tok), s0 + 1, s1 + 1, s2 + 1, s3 + 1, s4 + 1, s5 + 1, s6 + 1, s7 + 1, s8 + 1, s9 + 1, s10 + 1, s11 + 1, s12 + 1, s13 + 1, s14 + 1, s15 + 1, s16 + 1, s17 + 1, s18 + 1, s19 + 1, s20 + 1, s21 + 1, s22 + 1, s23 + 1, s24 + 1, s25 + 1, s26 + 1, s27 + 1, s28 + 1, s29 + 1, s30 + 1, s31 + 1, s32 + 1, s33 + 1, s34 + 1, s35 + 1, s36 + 1, s37 + 1, s38 + 1, s39 + 1, s40 + 1, s41 + 1, s42 + 1, s43 + 1, s44 + 1, s45 + 1, s46 + 1, s47 + 1, s48 + 1, s49 + 1, s50 + 1, s51 + 1, s52 + 1, s53 + 1, s54 + 1, s55 + 1, s56 + 1, s57 + 1, s58 + 1, s59 + 1, s60 + 1, s61 + 1, s62 + 1, s63 + 1

train
  data = text(steps = T)
  batch = 8
  optimizer = adam(lr = 0.01)
  epochs = 1
