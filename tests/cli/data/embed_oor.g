# embed_oor.g - an index past embed's table at run time: the error is at
# the prelude's line of the embedding, and a note points at the call of
# embed in this file (line 6), in the interpreter and the JIT alike.
model embed_oor
export def f(t: i32[2, 3])
  return embed(t, 5, 4)
example f([[0, 1, 2], [3, 4, 9]])
