# A model for --gradcheck's tests: a gradient that float32 cannot hold.
# (w + 2^20) - 2^20 is w in float64 (w is a float32, 24 bits) but w
# rounded to a multiple of 1/8 in float32, so the compiled gradient,
# 2w rounded so, is off from the float64 one by about 2%: step 1 fails,
# while float64 autodiff agrees with the differences.
model f32_cancels

export def loss(big: f32[1])
  param w : [4] = uniform(low = 1, high = 2)
  return sum(w * ((w + big) - big))

example loss([1048576.0])
