# Nadaraya-Watson kernel regression with a learnable kernel width
# (d2l 10.2.2): softmax(-((x - x_i) w)^2 / 2). Trained with leave-one-out
# keys: each training point is predicted from the 49 others.
model nw_param

dim Q                                  # query points
dim K                                  # keys per query

const n_train = 50

def f(x) = 2 * sin(x) + x ** 0.8

# The same data set as nadaraya_watson.g (same seeds).
def train_data()
  x = sort(uniform([n_train], 0, 5, seed = 1))
  y = f(x) + normal([n_train], 0, 0.5, seed = 2)
  return x, y

# queries (Q), keys and values (Q, K) -> predictions (Q), weights (Q, K)
def nw(queries, keys, values)
  param w : [1] = uniform(0, 1)
  d = (reshape(queries, [size(queries, 0), 1]) - keys) * w
  weights = softmax(-(d * d) / 2)
  return sum(weights * values, axis = 1), weights

# Row i of an (n, n) matrix without its diagonal element: (n, n - 1).
def off_diagonal(A, n) = reshape(reshape(reshape(A, [n * n])[1:], [n - 1, n + 1])[:, :n], [n, n - 1])

export def loss()
  x_train, y_train = train_data()
  keys = off_diagonal(repeat(x_train, [n_train, 1]), n_train)
  values = off_diagonal(repeat(y_train, [n_train, 1]), n_train)
  y_hat, weights = nw(x_train, keys, values)
  return sum((y_hat - y_train) ** 2)

export def forward(x_test: f32[Q])
  x_train, y_train = train_data()
  keys = broadcast(reshape(x_train, [1, n_train]), [Q, n_train])
  values = broadcast(reshape(y_train, [1, n_train]), [Q, n_train])
  y_hat, weights = nw(x_test, keys, values)
  return y_hat, weights

export def truth(x_test: f32[Q]) = f(x_test)

# The training set itself, for plots and tests.
export def data()
  x, y = train_data()
  return x, y

example forward(arange(0.0, 5.0, 0.1))

train
  entry = loss
  optimizer = sgd(lr = 0.5)
  epochs = 5
