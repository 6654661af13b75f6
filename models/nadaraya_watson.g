# Nadaraya-Watson kernel regression without parameters (d2l 10.2.1).
#
# The book's synthetic data: 50 training points x in [0, 5), sorted,
# y = 2 sin(x) + x^0.8 + N(0, 0.5). A test point's prediction is the
# average of the training targets weighted by a Gaussian kernel on the
# distance to each training point: softmax(-(x - x_i)^2 / 2).
model nadaraya_watson

dim Q                                  # test points, bound by the input

const n_train = 50

def f(x) = 2 * sin(x) + x ** 0.8

# The training set; the compiler folds it into constants.
def train_data()
  x = sort(uniform([n_train], 0, 5, seed = 1))
  y = f(x) + normal([n_train], 0, 0.5, seed = 2)
  return x, y

export def forward(x_test: f32[Q])
  x_train, y_train = train_data()
  d = reshape(x_test, [Q, 1]) - reshape(x_train, [1, n_train])   # (Q, n_train)
  weights = softmax(-(d * d) / 2)
  y_hat = reshape(weights @ reshape(y_train, [n_train, 1]), [Q])
  return y_hat, weights

# The noise-free curve at the test points, to plot against.
export def truth(x_test: f32[Q]) = f(x_test)

# The training set itself, for plots and tests.
export def data()
  x, y = train_data()
  return x, y

example forward(arange(0.0, 5.0, 0.1))
