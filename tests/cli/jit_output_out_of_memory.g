# An output larger than the machine's memory and swap (3.5 TiB) is an
# error at the line that computes it, naming the output and its size,
# before it is allocated (where the system overcommits, the allocation
# could succeed and the run be killed); it was a bare "out of memory".
model m

export def forward(x: f32[2, 3])
  y = broadcast(reshape(x, [2, 3, 1, 1]), [2, 3, 400000, 400000])
  return sum(x), y * 2
example forward(ones([2, 3]))
