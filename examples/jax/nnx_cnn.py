# A small Flax NNX CNN: two 3x3 convolutions (NHWC) with ReLU and 2x2 average pooling, then a
# linear classifier on the flattened features.
import jax
from flax import nnx

N, HW, C, CLASSES = 4, 16, 3, 10


class Model(nnx.Module):
    def __init__(self, c, classes, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(c, 16, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(16, 32, kernel_size=(3, 3), rngs=rngs)
        self.head = nnx.Linear(32 * (HW // 4) ** 2, classes, rngs=rngs)

    def __call__(self, x):
        x = nnx.avg_pool(jax.nn.relu(self.conv1(x)), window_shape=(2, 2), strides=(2, 2))
        x = nnx.avg_pool(jax.nn.relu(self.conv2(x)), window_shape=(2, 2), strides=(2, 2))
        return self.head(x.reshape(x.shape[0], -1))


def get_init_inputs():
    return [C, CLASSES]


def get_inputs():
    return [jax.random.normal(jax.random.key(14), (N, HW, HW, C))]
