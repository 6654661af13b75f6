# A width that H does not divide: the error is at the user's call of the
# prelude's split_heads, and a note shows the prelude's line.
model m

dim B

export def forward(x: f32[B, 4, 6])
  return split_heads(x, 4)
