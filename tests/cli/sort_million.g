# A line of a million elements in reverse order: the JIT's sort is
# O(n log n) (an insertion sort took minutes here). Sorted, element i is
# i - (N - 1): the largest distance from that is 0.
model sort_million

dim N

export def check(x: f32[N])
  s = sort(x)
  return max(abs(s - (arange(0.0, N) - size(x, 0) + 1))), sum(s)

example check(0 - arange(0.0, 1000000))
