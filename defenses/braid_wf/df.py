"""Deep Fingerprinting (Sirinam et al., CCS 2018), CPU-sized, in numpy.

PyTorch from PyPI is a 539 MB wheel that pulls several GB of CUDA
libraries on Linux (checked 2026-11-23 with ``pip download torch
--no-deps`` and its metadata), too much for this project's installs and CI,
so DF's network is written out here with its own backward pass.

What is kept from the paper: the input is the trace's direction sequence
(+1/-1, zero-padded or cut to ``length``); four blocks of [conv1d(k=8) ->
activation -> conv1d(k=8) -> activation -> max-pool(8, stride 4) ->
dropout(0.1)], ELU in the first block and ReLU after, filters doubling per
block; two fully-connected layers with dropout (0.7, 0.5); softmax;
Adamax (lr 0.002) on mini-batches. What is cut to fit a CPU: the input
length (default 1000 instead of 5000), the filters (8-16-32-64 instead of
32-64-128-256), the dense width (128 instead of 512), and batch
normalisation is left out. Closed world only (an unmonitored class can be
added as label -1, as the other attacks do).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from braid_wf.trace import Trace

F32 = npt.NDArray[np.float32]
K = 8
POOL, STRIDE = 8, 4


def direction_input(traces: Sequence[Trace], length: int) -> F32:
    x = np.zeros((len(traces), 1, length), dtype=np.float32)
    for i, t in enumerate(traces):
        d = t.directions[:length]
        x[i, 0, : len(d)] = d
    return x


class Conv:
    """1-D convolution, 'same' padding, as im2col + matmul."""

    def __init__(self, cin: int, cout: int, rng: np.random.Generator) -> None:
        self.w = (rng.standard_normal((cin * K, cout)) * np.sqrt(2 / (cin * K))).astype(np.float32)
        self.b = np.zeros(cout, dtype=np.float32)

    def forward(self, x: F32) -> F32:
        n, c, length = x.shape
        pad = np.pad(x, ((0, 0), (0, 0), (K // 2 - 1, K // 2)))
        cols = np.lib.stride_tricks.sliding_window_view(pad, K, axis=2)  # n, c, L, K
        self.cols = np.ascontiguousarray(cols.transpose(0, 2, 1, 3)).reshape(n, length, c * K)
        self.shape = x.shape
        return np.asarray((self.cols @ self.w + self.b).transpose(0, 2, 1), dtype=np.float32)

    def backward(self, dout: F32) -> F32:
        n, c, length = self.shape
        g = dout.transpose(0, 2, 1)  # n, L, F
        self.dw = np.einsum("nlk,nlf->kf", self.cols, g, optimize=True)
        self.db = g.sum(axis=(0, 1))
        dcols = (g @ self.w.T).reshape(n, length, c, K)
        dpad = np.zeros((n, c, length + K - 1), dtype=np.float32)
        for j in range(K):
            dpad[:, :, j : j + length] += dcols[:, :, :, j].transpose(0, 2, 1)
        return dpad[:, :, K // 2 - 1 : K // 2 - 1 + length]

    def params(self) -> list[tuple[F32, F32]]:
        """(weight, its gradient from the last backward) pairs."""
        return [(self.w, self.dw), (self.b, self.db)]

    def weights(self) -> list[F32]:
        return [self.w, self.b]


class Act:
    def __init__(self, elu: bool) -> None:
        self.elu = elu

    def forward(self, x: F32) -> F32:
        self.x = x
        if self.elu:
            return np.where(x > 0, x, np.expm1(np.minimum(x, 0))).astype(np.float32)
        return np.maximum(x, 0)

    def backward(self, d: F32) -> F32:
        if self.elu:
            return d * np.where(self.x > 0, 1.0, np.exp(np.minimum(self.x, 0))).astype(np.float32)
        return d * (self.x > 0)

    def params(self) -> list[tuple[F32, F32]]:
        return []

    def weights(self) -> list[F32]:
        return []


class Pool:
    def forward(self, x: F32) -> F32:
        win = np.lib.stride_tricks.sliding_window_view(x, POOL, axis=2)[:, :, ::STRIDE]  # n,c,L',P
        self.arg = win.argmax(axis=3)
        self.shape = x.shape
        return np.asarray(win.max(axis=3), dtype=np.float32)

    def backward(self, d: F32) -> F32:
        dx = np.zeros(self.shape, dtype=np.float32)
        n, c, lo = d.shape
        idx = np.arange(lo) * STRIDE + self.arg  # n, c, L'
        ni, ci = np.meshgrid(np.arange(n), np.arange(c), indexing="ij")
        np.add.at(dx, (ni[..., None], ci[..., None], idx), d)
        return dx

    def params(self) -> list[tuple[F32, F32]]:
        return []

    def weights(self) -> list[F32]:
        return []


class Dropout:
    def __init__(self, rate: float, rng: np.random.Generator) -> None:
        self.rate, self.rng, self.train = rate, rng, True

    def forward(self, x: F32) -> F32:
        if not self.train or self.rate == 0:
            self.mask = np.ones_like(x)
            return x
        self.mask = (self.rng.random(x.shape) >= self.rate).astype(np.float32) / (1 - self.rate)
        return x * self.mask

    def backward(self, d: F32) -> F32:
        return d * self.mask

    def params(self) -> list[tuple[F32, F32]]:
        return []

    def weights(self) -> list[F32]:
        return []


class Dense:
    def __init__(self, nin: int, nout: int, rng: np.random.Generator) -> None:
        self.w = (rng.standard_normal((nin, nout)) * np.sqrt(2 / nin)).astype(np.float32)
        self.b = np.zeros(nout, dtype=np.float32)

    def forward(self, x: F32) -> F32:
        self.shape = x.shape
        self.x = x.reshape(len(x), -1)
        return np.asarray(self.x @ self.w + self.b, dtype=np.float32)

    def backward(self, d: F32) -> F32:
        self.dw = self.x.T @ d
        self.db = d.sum(axis=0)
        return np.asarray((d @ self.w.T).reshape(self.shape), dtype=np.float32)

    def params(self) -> list[tuple[F32, F32]]:
        """(weight, its gradient from the last backward) pairs."""
        return [(self.w, self.dw), (self.b, self.db)]

    def weights(self) -> list[F32]:
        return [self.w, self.b]


Layer = Conv | Act | Pool | Dropout | Dense


class DeepFingerprinting:
    name = "DF"

    def __init__(self, length: int = 1000, filters: tuple[int, ...] = (8, 16, 32, 64), dense: int = 128,
                 epochs: int = 30, batch: int = 64, lr: float = 0.002, seed: int = 0) -> None:
        self.length, self.filters, self.dense = length, filters, dense
        self.epochs, self.batch, self.lr = epochs, batch, lr
        self.rng = np.random.default_rng(seed)

    def _build(self, classes: int) -> None:
        rng = self.rng
        layers: list[Layer] = []
        cin, length = 1, self.length
        for i, f in enumerate(self.filters):
            layers += [Conv(cin, f, rng), Act(elu=i == 0), Conv(f, f, rng), Act(elu=i == 0), Pool(),
                       Dropout(0.1, rng)]
            cin, length = f, (length - POOL) // STRIDE + 1
        layers += [Dense(cin * length, self.dense, rng), Act(False), Dropout(0.7, rng),
                   Dense(self.dense, self.dense, rng), Act(False), Dropout(0.5, rng),
                   Dense(self.dense, classes, rng)]
        self.layers = layers

    def _forward(self, x: F32, train: bool) -> F32:
        for layer in self.layers:
            if isinstance(layer, Dropout):
                layer.train = train
            x = layer.forward(x)
        return x

    def fit(self, traces: Sequence[Trace], labels: Sequence[int]) -> None:
        self.classes = np.asarray(sorted(set(labels)), dtype=np.int64)
        y = np.searchsorted(self.classes, np.asarray(labels))
        x = direction_input(traces, self.length)
        self._build(len(self.classes))
        params = [w for layer in self.layers for w in layer.weights()]
        m = [np.zeros_like(p) for p in params]
        u = [np.zeros_like(p) for p in params]
        step = 0
        b1, b2 = 0.9, 0.999
        for _epoch in range(self.epochs):
            order = self.rng.permutation(len(x))
            for s in range(0, len(x), self.batch):
                idx = order[s : s + self.batch]
                logits = self._forward(x[idx], train=True)
                p = np.exp(logits - logits.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                p[np.arange(len(idx)), y[idx]] -= 1  # softmax cross-entropy gradient
                d = (p / len(idx)).astype(np.float32)
                for layer in reversed(self.layers):
                    d = layer.backward(d)
                step += 1
                grads = [g for layer in self.layers for _, g in layer.params()]
                for i, (w, g) in enumerate(zip(params, grads, strict=True)):  # Adamax
                    m[i] = b1 * m[i] + (1 - b1) * g
                    u[i] = np.maximum(b2 * u[i], np.abs(g))
                    w -= (self.lr / (1 - b1**step)) * m[i] / (u[i] + 1e-7)

    def predict(self, traces: Sequence[Trace]) -> npt.NDArray[np.int64]:
        x = direction_input(traces, self.length)
        out = [self._forward(x[s : s + 256], train=False).argmax(axis=1) for s in range(0, len(x), 256)]
        return np.asarray(self.classes[np.concatenate(out)], dtype=np.int64)
