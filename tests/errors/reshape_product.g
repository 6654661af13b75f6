# A product dim whose element count does not match: [B, T, 4] has
# B*T*4 elements, [B * T, 5] has B*T*5.
model m

dim B, T

export def forward(x: f32[B, T, 4])
  return reshape(x, [B * T, 5])
