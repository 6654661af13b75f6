# A translation train block that splits its batch into half a shard.
model nmt_bad_shards

dim B, V_src, V_tgt

export def loss(src: i32[B, 10], src_valid: i32[B], tgt_in: i32[B, 10],
                tgt: i32[B, 10], tgt_valid: i32[B])
  param w : [1] = ones
  return sum(w)

train
  data = nmt(examples = 600, steps = 10)
  batch = 8
  shards = 1.5
  optimizer = adam(lr = 0.005)
  epochs = 1
