# A translation train block whose nmt(...) has a setting it does not know.
model nmt_bad_setting

dim B, V_src, V_tgt

export def loss(src: i32[B, 10], src_valid: i32[B], tgt_in: i32[B, 10],
                tgt: i32[B, 10], tgt_valid: i32[B])
  param w : [1] = ones
  return sum(w)

train
  data = nmt(examples = 600, step = 10)
  optimizer = adam(lr = 0.005)
  epochs = 1
