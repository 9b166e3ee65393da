"""The few layers DF, Tik-Tok and RF are made of, as pure JAX functions.

Channels are last (NWC for sequences, NHWC for RF's matrix). Each layer
with weights has an ``*_init`` that returns its parameters; batch
normalisation also keeps running statistics (``state``), updated in
training and used in evaluation.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

Params = dict[str, Any]


def glorot(key: jax.Array, shape: tuple[int, ...], fan_in: int, fan_out: int) -> jax.Array:
    """Glorot-uniform, Keras's default (DF's reference is in Keras)."""
    limit = jnp.sqrt(6.0 / (fan_in + fan_out))
    return jax.random.uniform(key, shape, jnp.float32, -limit, limit)


def he_normal(key: jax.Array, shape: tuple[int, ...], fan_out: int) -> jax.Array:
    """N(0, 2/fan_out), the initialisation RF's reference uses for its convolutions."""
    return jax.random.normal(key, shape, jnp.float32) * jnp.sqrt(2.0 / fan_out)


def conv_init(key: jax.Array, kernel: tuple[int, ...], cin: int, cout: int, init: str = "glorot") -> Params:
    """Weights for a convolution with kernel ``kernel`` (1-D or 2-D)."""
    shape = (*kernel, cin, cout)
    area = 1
    for k in kernel:
        area *= k
    w = glorot(key, shape, area * cin, area * cout) if init == "glorot" else he_normal(key, shape, area * cout)
    return {"w": w, "b": jnp.zeros(cout, jnp.float32)}


def conv(p: Params, x: jax.Array, padding: str | tuple[tuple[int, int], ...] = "SAME") -> jax.Array:
    """Stride-1 convolution over the axes between batch and channels."""
    spatial = x.ndim - 2
    spec = ("NWC", "WIO", "NWC") if spatial == 1 else ("NHWC", "HWIO", "NHWC")
    y: jax.Array = jax.lax.conv_general_dilated(x, p["w"], (1,) * spatial, padding, dimension_numbers=spec)
    return jnp.add(y, p["b"])


def dense_init(key: jax.Array, fan_in: int, fan_out: int) -> Params:
    return {"w": glorot(key, (fan_in, fan_out), fan_in, fan_out), "b": jnp.zeros(fan_out, jnp.float32)}


def dense(p: Params, x: jax.Array) -> jax.Array:
    y: jax.Array = x @ p["w"] + p["b"]
    return y


def batchnorm_init(channels: int) -> tuple[Params, Params]:
    """(scale and shift, running mean and variance)."""
    return ({"scale": jnp.ones(channels, jnp.float32), "shift": jnp.zeros(channels, jnp.float32)},
            {"mean": jnp.zeros(channels, jnp.float32), "var": jnp.ones(channels, jnp.float32)})


def batchnorm(p: Params, s: Params, x: jax.Array, train: bool, momentum: float,
              eps: float) -> tuple[jax.Array, Params]:
    """Normalise over every axis but the channels. ``momentum`` is the
    weight of the old running statistics (Keras 0.99; PyTorch's 0.1 is
    0.9 here)."""
    axes = tuple(range(x.ndim - 1))
    if train:
        mean, var = x.mean(axes), x.var(axes)
        s = {"mean": momentum * s["mean"] + (1 - momentum) * mean,
             "var": momentum * s["var"] + (1 - momentum) * var}
    else:
        mean, var = s["mean"], s["var"]
    return (x - mean) * jax.lax.rsqrt(var + eps) * p["scale"] + p["shift"], s


def max_pool(x: jax.Array, window: tuple[int, ...], stride: tuple[int, ...],
             padding: str = "VALID") -> jax.Array:
    """Max-pooling over the axes between batch and channels."""
    y: jax.Array = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, *window, 1), (1, *stride, 1), padding)
    return y


def dropout(key: jax.Array, x: jax.Array, rate: float, train: bool) -> jax.Array:
    if not train or rate == 0.0:
        return x
    keep = jax.random.bernoulli(key, 1.0 - rate, x.shape)
    y: jax.Array = jnp.where(keep, x / (1.0 - rate), 0.0)
    return y
