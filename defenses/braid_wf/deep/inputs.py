"""The inputs the deep attacks read, from a trace (numpy only).

- **direction** (DF, Sirinam et al. CCS 2018): each packet's direction,
  +1 out / -1 in, the first ``length`` packets (5000 in the paper),
  zero-padded.
- **directional timing** (Tik-Tok, Rahman et al. PETS 2020): each packet's
  time since the load began times its direction, same length and padding.
- **TAM**, the Traffic Aggregation Matrix (RF, Shen et al. USENIX Security
  2023): two rows (outgoing, incoming) of packet counts per time slot; the
  load's first ``max_time`` seconds (80) in ``slots`` slots (1800, so 44 ms
  each); packets later than ``max_time`` count in the last slot.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from braid_wf.trace import Trace

F32 = npt.NDArray[np.float32]

DF_LENGTH = 5000
TAM_SLOTS = 1800
TAM_MAX_TIME_S = 80.0


def direction(traces: Sequence[Trace], length: int = DF_LENGTH) -> F32:
    """(n, length, 1): the direction sequences."""
    x = np.zeros((len(traces), length, 1), dtype=np.float32)
    for i, t in enumerate(traces):
        d = t.directions[:length]
        x[i, : len(d), 0] = d
    return x


def directional_timing(traces: Sequence[Trace], length: int = DF_LENGTH) -> F32:
    """(n, length, 1): time (s) times direction, per packet."""
    x = np.zeros((len(traces), length, 1), dtype=np.float32)
    for i, t in enumerate(traces):
        n = min(len(t), length)
        x[i, :n, 0] = t.times[:n] * t.directions[:n]
    return x


def tam(traces: Sequence[Trace], slots: int = TAM_SLOTS, max_time: float = TAM_MAX_TIME_S) -> F32:
    """(n, 2, slots, 1): per slot, outgoing packets (row 0) and incoming (row 1)."""
    x = np.zeros((len(traces), 2, slots, 1), dtype=np.float32)
    for i, t in enumerate(traces):
        # The reference maps time t to slot int(t * (slots - 1) / max_time).
        slot = np.where(t.times >= max_time, slots - 1,
                        (np.clip(t.times, 0.0, None) * (slots - 1) / max_time).astype(np.int64))
        for row, mask in ((0, t.sizes > 0), (1, t.sizes < 0)):
            np.add.at(x[i, row, :, 0], slot[mask], 1.0)
    return x
