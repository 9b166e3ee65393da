"""A deep attack's training saved after every epoch, so that a run that
stops (a session's end, a killed job, a full disk) goes on from its last
epoch instead of from the first.

A checkpoint holds everything the next epoch depends on: the network's
parameters and batch-norm state, the optimiser's state, the JAX key and the
numpy generator that orders the batches, and the learning curve so far.
Resuming from it therefore gives the same model, to the prediction, as a
training that never stopped (tests/test_deep_attacks.py checks it).

Each checkpoint is tied to one training by a fingerprint of its inputs,
labels, held-out data, recipe and code (the networks, the optimisers, the
JAX version): a checkpoint of another training is refused with the path
to remove, never silently continued, and a change to a network starts its
trainings afresh. A finished training keeps its checkpoint, so that
running the same command again scores the finished model without
training it again.

The file is an ``.npz`` (numpy arrays, no pickle), written to a temporary
name and renamed, so that a stop during the write leaves the previous
epoch's checkpoint whole. A checkpoint that cannot be written (a full
disk) is reported and the training goes on without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

FORMAT = 1


class CheckpointMismatch(RuntimeError):
    """The checkpoint on disk belongs to another training."""


def fingerprint(*parts: Any) -> str:
    """A digest of the training's inputs: arrays by their dtype, shape and
    bytes, anything else by its repr."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        if isinstance(part, np.ndarray):
            h.update(f"{part.dtype}{part.shape}".encode())
            h.update(np.ascontiguousarray(part).data)
        else:
            h.update(repr(part).encode())
        h.update(b"\0")
    return h.hexdigest()


@dataclass
class Saved:
    """One epoch's end, as numpy arrays: the pytrees as their flattened
    leaves, in the order ``jax.tree_util.tree_leaves`` gives them."""

    epoch: int  # epochs done
    params: list[npt.NDArray[Any]]
    state: list[npt.NDArray[Any]]
    opt_state: list[npt.NDArray[Any]]
    key: npt.NDArray[Any]  # jax.random.key_data of the training key
    rng: dict[str, Any]  # the batch-order generator's bit_generator.state
    curve: list[tuple[int, float]]


def save(path: Path, digest: str, saved: Saved) -> None:
    """Write ``saved`` as the checkpoint of the training ``digest`` names:
    to a temporary file of its own (two runs of one training do not mix
    their writes), then renamed over ``path``."""
    meta = {"format": FORMAT, "fingerprint": digest, "epoch": saved.epoch, "rng": saved.rng,
            "curve": saved.curve, "leaves": [len(saved.params), len(saved.state), len(saved.opt_state)]}
    contents: dict[str, Any] = {"meta": np.asarray(json.dumps(meta)), "key": saved.key}
    contents.update((f"leaf{i}", a) for i, a in enumerate([*saved.params, *saved.state, *saved.opt_state]))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, **contents)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def load(path: Path, digest: str) -> Saved | None:
    """The checkpoint at ``path``, None when there is none; raises
    CheckpointMismatch when it is another training's."""
    if not path.exists():
        return None
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        if meta.get("format") != FORMAT or meta.get("fingerprint") != digest:
            raise CheckpointMismatch(
                f"{path} is the checkpoint of another training (other data, labels or settings); "
                "remove it, or give this run another checkpoint directory")
        n_params, n_state, n_opt = meta["leaves"]
        leaves = [z[f"leaf{i}"] for i in range(n_params + n_state + n_opt)]
        return Saved(epoch=int(meta["epoch"]), params=leaves[:n_params],
                     state=leaves[n_params:n_params + n_state], opt_state=leaves[n_params + n_state:],
                     key=z["key"], rng=meta["rng"], curve=[(int(e), float(a)) for e, a in meta["curve"]])
