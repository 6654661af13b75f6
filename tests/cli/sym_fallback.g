# sym_fallback.g - a dimension no input binds, with a fallback that
# --sym replaces: arange(K) sums 0 .. K-1 (3 by default, 21 for K=7).
model sym_fallback

dim N, K = 3

export def f(a: f32[N, 3])
  return a + cast(sum(arange(K)), f32)

example f([[1.0, 2.0, 3.0]])
