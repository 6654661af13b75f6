# One name defined twice, and a prelude name redefined.
model m

def block(x) = relu(x)
const block = 3
def linear(x) = x

export def forward(x: f32[3]) = block(x)
