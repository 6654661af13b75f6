# An empty list of axes reduces every axis, as PyTorch 1.13's
# sum(x, dim=[]), mean(x, dim=[]) and amax(x, dim=[]): torch gives
# tensor(15.), tensor([[15.]]), tensor(2.5000), tensor(5.), tensor(15).
model m

export def forward(x: f32[2, 3], v: i32[2, 3])
  return sum(x, axis = []), sum(x, [], keepdim = true), mean(x, []), max(x, axis = []), sum(v, [])
example forward(reshape(arange(6.0), [2, 3]), reshape(arange(6), [2, 3]))
