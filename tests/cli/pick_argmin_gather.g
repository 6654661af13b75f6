# A model of indexing, checked against an independent PyTorch 1.13
# program (offline) on the weights attnc initializes (--save) and these
# inputs: items scored by a small MLP (leaky ReLU by where), the items of
# largest and smallest norm picked by argmax / argmin and gathered (an
# embedding of the flattened batch, torch.gather), a one-hot made by
# comparison (an i32 one times f32 scores, promoted as torch does). torch
# gave loss 1.5307 (1.530679), far [4, 4, 4], near [0, 1, 1], the
# predicted items [1, 3, 4].
model pick
dim B
const N = 6, D = 5, F = 8

export def loss(x: f32[B, N, D], y: i32[B])
  h = linear(x, F)
  h = where(h > 0, h, 0.1 * h)
  s = squeeze(linear(h, 1), -1)
  key = sum(x * x, axis = -1)
  far = argmax(key, axis = 1)
  near = argmin(key, 1)
  rows = reshape(h, [-1, F])
  base = arange(size(x, 0)) * N
  gap = embedding(base + far, rows) - embedding(base + near, rows)
  onehot = reshape(arange(N), [1, N]) == unsqueeze(y, 1)
  top = argmax(s, 1)
  chosen = sum(s * (reshape(arange(N), [1, N]) == unsqueeze(top, 1)), axis = 1)
  l = mean(cross_entropy(s, y)) + 0.1 * mean(gap * gap) + 0.05 * mean(chosen) - 0.01 * mean(sum(onehot * s, axis = 1))
  return l, far, near, top

example loss([[[0.05, 0.52, -0.11, -0.09, 0.5], [0.51, 0.35, -1.42, -0.57, -0.31], [0.74, 0.05, -0.39, 0.38, 0.33], [-1.14, 0.54, -0.42, 0.21, 0.46], [-0.96, 1.21, -1.01, 0.86, 0.64], [-0.17, 1.22, -0.62, -1.36, 0.02]],
              [[-0.94, -0.07, 0.27, 1.52, -0.23], [0.1, 0.66, 0.79, -0.12, 0.91], [-1.0, -0.53, -0.69, -0.32, 0.6], [0.02, 0.95, -1.35, -0.57, 0.75], [-0.14, -0.37, -1.93, 0.63, -1.09], [0.41, -1.03, -0.54, 1.5, -1.01]],
              [[-0.92, -0.22, -1.82, -0.01, 0.03], [-0.3, -0.84, -0.1, -0.68, -0.36], [-0.83, 0.56, -0.42, 0.92, -0.87], [-0.3, -0.71, 0.42, 1.1, 0.73], [1.57, 0.5, -1.55, 0.18, 1.0], [0.67, 0.07, 0.14, 0.11, -1.77]]],
             [2, 5, 4])
