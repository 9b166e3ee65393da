"""The networks of DF, Tik-Tok and RF, as their papers and reference code
define them.

**DF** (Sirinam et al., CCS 2018; its Keras reference): four blocks of
[conv(k=8) -> batch norm -> activation -> conv(k=8) -> batch norm ->
activation -> max-pool(8, stride 4, 'same') -> dropout 0.1], filters
32-64-128-256, ELU in the first block and ReLU after; flatten; two dense
layers of 512 with batch norm, ReLU and dropout 0.7 / 0.5; a dense layer
to the classes. Keras's batch norm (momentum 0.99, epsilon 1e-3) and
Glorot-uniform initialisation.

**Tik-Tok** (Rahman et al., PETS 2020) is DF's network on directional
timing instead of directions.

**RF** (Shen et al., USENIX Security 2023; its PyTorch reference): on the
2 x 1800 TAM as a one-channel image, two 2-D blocks [conv(3x6, pad 1) ->
BN -> ReLU, twice, then max-pool] with 32 then 64 filters (pools 1x3 and
2x2, dropout 0.1); the 64 x 1 x 293 result is re-read as 32 channels of
586 (the reference's ``view``); then 1-D [conv(k=3) -> BN -> ReLU] layers
of 128, 128, max-pool 3 + dropout 0.3, 256, 256, max-pool 3 + dropout
0.3, 512, and one to the classes, averaged over time: those averages are
the logits. PyTorch's batch norm (momentum 0.1, epsilon 1e-5).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

from braid_wf.deep import layers as nn

Params = dict[str, Any]

DF_FILTERS = (32, 64, 128, 256)
DF_KERNEL = 8
DF_POOL, DF_POOL_STRIDE = 8, 4
DF_DENSE = 512
KERAS_BN = {"momentum": 0.99, "eps": 1e-3}
TORCH_BN = {"momentum": 0.9, "eps": 1e-5}


def _bn(published: dict[str, float], stats_momentum: float | None) -> dict[str, float]:
    """Batch-norm settings; ``stats_momentum`` 0 makes the new state the
    batch's own statistics (train.DeepAttack's recalibration)."""
    return published if stats_momentum is None else {**published, "momentum": stats_momentum}


def _conv_bn_init(params: Params, state: Params, name: str, key: jax.Array, kernel: tuple[int, ...],
                  cin: int, cout: int, init: str = "glorot") -> None:
    """A convolution ``conv<name>`` and its batch norm ``bn<name>``."""
    params[f"conv{name}"] = nn.conv_init(key, kernel, cin, cout, init)
    params[f"bn{name}"], state[f"bn{name}"] = nn.batchnorm_init(cout)


def _conv_bn(params: Params, state: Params, new: Params, name: str, x: jax.Array, train: bool,
             bn: dict[str, float], padding: str | tuple[tuple[int, int], ...] = "SAME") -> jax.Array:
    """``conv<name>`` then ``bn<name>``, its new statistics put in ``new``."""
    x = nn.conv(params[f"conv{name}"], x, padding)
    x, new[f"bn{name}"] = nn.batchnorm(params[f"bn{name}"], state[f"bn{name}"], x, train, **bn)
    return x


def _pooled_length(length: int, blocks: int) -> int:
    for _ in range(blocks):
        length = -(-length // DF_POOL_STRIDE)  # 'same' padding
    return length


@dataclass(frozen=True)
class DFNet:
    """DF's network for inputs of (length, 1)."""

    length: int
    classes: int

    def init(self, key: jax.Array) -> tuple[Params, Params]:
        params: Params = {}
        state: Params = {}
        keys = iter(jax.random.split(key, 16))
        cin = 1
        for b, f in enumerate(DF_FILTERS):
            for c in range(2):
                _conv_bn_init(params, state, f"{b}{c}", next(keys), (DF_KERNEL,), cin, f)
                cin = f
        flat = _pooled_length(self.length, len(DF_FILTERS)) * cin
        params["fc0"] = nn.dense_init(next(keys), flat, DF_DENSE)
        params["fc1"] = nn.dense_init(next(keys), DF_DENSE, DF_DENSE)
        for i in range(2):
            params[f"bnfc{i}"], state[f"bnfc{i}"] = nn.batchnorm_init(DF_DENSE)
        params["out"] = nn.dense_init(next(keys), DF_DENSE, self.classes)
        return params, state

    def apply(self, params: Params, state: Params, x: jax.Array, train: bool,
              key: jax.Array, stats_momentum: float | None = None) -> tuple[jax.Array, Params]:
        bn = _bn(KERAS_BN, stats_momentum)
        new: Params = {}
        keys = iter(jax.random.split(key, 8))
        for b in range(len(DF_FILTERS)):
            for c in range(2):
                x = _conv_bn(params, state, new, f"{b}{c}", x, train, bn)
                x = jax.nn.elu(x) if b == 0 else jax.nn.relu(x)
            x = nn.max_pool(x, (DF_POOL,), (DF_POOL_STRIDE,), "SAME")
            x = nn.dropout(next(keys), x, 0.1, train)
        x = x.reshape(x.shape[0], -1)
        for i, rate in enumerate((0.7, 0.5)):
            x = nn.dense(params[f"fc{i}"], x)
            x, new[f"bnfc{i}"] = nn.batchnorm(params[f"bnfc{i}"], state[f"bnfc{i}"], x, train, **bn)
            x = nn.dropout(next(keys), jax.nn.relu(x), rate, train)
        return nn.dense(params["out"], x), new


RF_2D = ((32, (1, 3)), (64, (2, 2)))  # filters, max-pool window (= stride)
RF_KERNEL_2D = (3, 6)
RF_PAD_2D = ((1, 1), (1, 1))
RF_1D: tuple[int | str, ...] = (128, 128, "pool", 256, 256, "pool", 512)
RF_CHANNELS_1D = 32


@dataclass(frozen=True)
class RFNet:
    """RF's network for a TAM of (2, slots, 1)."""

    slots: int
    classes: int

    def init(self, key: jax.Array) -> tuple[Params, Params]:
        params: Params = {}
        state: Params = {}
        keys = iter(jax.random.split(key, 16))
        cin = 1
        for b, (filters, _pool) in enumerate(RF_2D):
            for c in range(2):
                _conv_bn_init(params, state, f"{b}{c}", next(keys), RF_KERNEL_2D, cin, filters, init="he")
                cin = filters
        cin = RF_CHANNELS_1D
        for i, f in enumerate((*RF_1D, self.classes)):
            if isinstance(f, str):  # a pool
                continue
            _conv_bn_init(params, state, f"1d{i}", next(keys), (3,), cin, f, init="he")
            cin = f
        return params, state

    def apply(self, params: Params, state: Params, x: jax.Array, train: bool,
              key: jax.Array, stats_momentum: float | None = None) -> tuple[jax.Array, Params]:
        bn = _bn(TORCH_BN, stats_momentum)
        new: Params = {}
        keys = iter(jax.random.split(key, 4))
        for b, (_f, pool) in enumerate(RF_2D):
            for c in range(2):
                x = jax.nn.relu(_conv_bn(params, state, new, f"{b}{c}", x, train, bn, RF_PAD_2D))
            x = nn.dropout(next(keys), nn.max_pool(x, pool, pool), 0.1, train)
        # (n, 1, W, 64) -> the reference's channel-major view as 32 channels of 2W.
        n = x.shape[0]
        x = jnp.transpose(x.reshape(n, -1, x.shape[-1]), (0, 2, 1)).reshape(n, RF_CHANNELS_1D, -1)
        x = jnp.transpose(x, (0, 2, 1))
        for i, f in enumerate((*RF_1D, self.classes)):
            if isinstance(f, str):
                x = nn.dropout(next(keys), nn.max_pool(x, (3,), (3,)), 0.3, train)
                continue
            x = jax.nn.relu(_conv_bn(params, state, new, f"1d{i}", x, train, bn))
        return x.mean(axis=1), new
