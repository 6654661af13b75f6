# Integer constants outside int32 where an i32 tensor is made of them: a
# list, full and arange. Each is an error (they became INT32_MIN).
model m

export def f(x: i32[3])
  a = x + [1, 2, 2147483648]
  b = x + full([3], -3000000000)
  c = x + arange(2147483645, 2147483649)[1:]
  return a + b + c

example f([1, 2, 4294967297])
