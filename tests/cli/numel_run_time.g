# numel_run_time.g - a (K, K, K) tensor whose K a --sym sets: past
# 2^40 elements (K = 3000000 makes 2.7e19, past int64) it is refused
# at its line, for the JIT as for the interpreter.
model numel_run_time

dim K = 3

export def f(x: f32[2])
  a = cast(arange(K), f32)
  c = reshape(a, [K, 1, 1]) + reshape(a, [1, K, 1]) + reshape(a, [1, 1, K])
  return x * sum(sort(c))

example f([1.0, 2.0])
