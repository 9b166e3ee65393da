"""Build kernel/policy/harness.c against the kernel's policy headers and load
it with ctypes, so tests drive the exact decision code the kernel runs.

Usage::

    lib = load_harness()
    lib.harness_seed(42)
    lengths = [lib.harness_hywf_draw_burst(20) for _ in range(1000)]
"""

from __future__ import annotations

import ctypes
import subprocess
import tempfile
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
POLICY_INCLUDE = HERE.parent / "series-added" / "net" / "mptcp"
HYWF_ONE = 1 << 16
HYWF_MAX_PATHS = 8
BERN_ONE = 1 << 16


class HywfEpoch(ctypes.Structure):
    """Mirror of struct hywf_epoch (checked against sizeof at load)."""

    _fields_ = (
        ("weight", ctypes.c_uint32 * HYWF_MAX_PATHS),
        ("last_ms", ctypes.c_uint32),
        ("draws", ctypes.c_uint32),
        ("burst_left", ctypes.c_uint32),
        ("burst_seq", ctypes.c_uint32),
        ("nr_paths", ctypes.c_uint8),
        ("burst_path", ctypes.c_uint8),
    )


class HywfDrift(ctypes.Structure):
    """Mirror of struct hywf_drift (checked against sizeof at load)."""

    _fields_ = (
        ("weight", ctypes.c_uint32 * 2),
        ("left", ctypes.c_uint32),
        ("epoch_draws", ctypes.c_uint32),
        ("draws", ctypes.c_uint32),
    )


@cache
def load_harness() -> ctypes.CDLL:
    """Compile (warnings are errors) and load the harness library."""
    out = Path(tempfile.mkdtemp(prefix="braid-policy-")) / "libpolicy.so"
    subprocess.run(
        ["gcc", "-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
         f"-I{POLICY_INCLUDE}", "-o", str(out), str(HERE / "harness.c")],
        check=True,
    )
    lib = ctypes.CDLL(str(out))
    u32, p_u32 = ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint32)
    lib.harness_seed.argtypes = [ctypes.c_uint64]
    lib.harness_hywf_draw_burst.argtypes = [u32]
    lib.harness_hywf_draw_burst.restype = u32
    lib.harness_hywf_draw_burst_from.argtypes = [u32, u32]
    lib.harness_hywf_draw_burst_from.restype = u32
    lib.harness_hywf_log2.argtypes = [ctypes.c_uint64]
    lib.harness_hywf_log2.restype = ctypes.c_uint64
    lib.harness_hywf_draw_weights.argtypes = [u32, u32, p_u32]
    lib.harness_hywf_pick_path.argtypes = [p_u32, u32]
    lib.harness_hywf_pick_path.restype = u32
    lib.harness_hywf_idle_expired.argtypes = [u32, u32, u32]
    lib.harness_hywf_idle_expired.restype = ctypes.c_bool
    lib.harness_hywf_next_burst.argtypes = [
        ctypes.POINTER(HywfEpoch), u32, u32, u32, u32, u32, p_u32]
    lib.harness_hywf_next_burst.restype = u32
    lib.harness_hywf_take_burst.argtypes = [ctypes.POINTER(HywfEpoch), u32, u32, u32, u32, p_u32, p_u32]
    lib.harness_hywf_take_burst.restype = u32
    lib.harness_hywf_give_back.argtypes = [ctypes.POINTER(HywfEpoch), u32, u32, u32, u32, u32]
    lib.harness_hywf_give_back.restype = ctypes.c_bool
    lib.harness_hywf_take_back.argtypes = [ctypes.POINTER(HywfEpoch), u32, u32, u32, u32, u32]
    lib.harness_hywf_take_back.restype = u32
    lib.harness_hywf_next_burst_drift.argtypes = [
        ctypes.POINTER(HywfEpoch), ctypes.POINTER(HywfDrift), u32, u32, u32, u32, u32, p_u32]
    lib.harness_hywf_next_burst_drift.restype = u32
    lib.harness_hywf_drift_size.restype = u32
    lib.harness_hywf_keep_burst.argtypes = [p_u32, ctypes.c_bool, ctypes.c_bool, u32, u32, ctypes.c_int, u32, u32]
    lib.harness_hywf_keep_burst.restype = ctypes.c_bool
    lib.harness_hywf_epoch_touch_due.argtypes = [p_u32, u32, u32]
    lib.harness_hywf_epoch_touch_due.restype = ctypes.c_bool
    lib.harness_hywf_epoch_touch.argtypes = [ctypes.POINTER(HywfEpoch), u32, u32, u32]
    lib.harness_hywf_epoch_size.restype = u32
    u64, p_u64 = ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)
    lib.harness_bern_isqrt.argtypes = [u64]
    lib.harness_bern_isqrt.restype = u64
    lib.harness_bern_optimal_weights.argtypes = [p_u64, u32, u64, p_u32]
    lib.harness_bern_optimal_weights.restype = u32
    lib.harness_bern_fixed_weights.argtypes = [u32, u32, p_u32]
    lib.harness_bern_ewma.argtypes = [u64, u64, u32]
    lib.harness_bern_ewma.restype = u64
    lib.harness_bern_waiting.argtypes = [u64, u64, u32]
    lib.harness_bern_waiting.restype = u64
    lib.harness_bern_bounded_pick.argtypes = [p_u64, u32, u32, u32]
    lib.harness_bern_bounded_pick.restype = u32
    lib.harness_dbal_earliest.argtypes = [p_u64, p_u64, p_u32, u32, u32, u32]
    lib.harness_dbal_earliest.restype = u32
    lib.harness_dbal_wait_pays.argtypes = [p_u64, p_u64, p_u32, u32, u64]
    lib.harness_dbal_wait_pays.restype = ctypes.c_bool
    lib.harness_rate_update.argtypes = [p_u64, p_u32, u64, u64, u32]
    lib.harness_rate_update.restype = u64
    if lib.harness_hywf_epoch_size() != ctypes.sizeof(HywfEpoch):
        raise RuntimeError("HywfEpoch mirror does not match struct hywf_epoch")
    if lib.harness_hywf_drift_size() != ctypes.sizeof(HywfDrift):
        raise RuntimeError("HywfDrift mirror does not match struct hywf_drift")
    return lib


def draw_weights(ps_permille: int, n: int) -> list[int]:
    lib = load_harness()
    buf = (ctypes.c_uint32 * HYWF_MAX_PATHS)()
    lib.harness_hywf_draw_weights(ps_permille, n, buf)
    return list(buf[:n])


def bernoulli_weights(mu: list[int], load: int) -> tuple[list[int], int]:
    """bern_optimal_weights: (weights in units of BERN_ONE, paths used)."""
    lib = load_harness()
    rates = (ctypes.c_uint64 * len(mu))(*mu)
    out = (ctypes.c_uint32 * len(mu))()
    used = lib.harness_bern_optimal_weights(rates, len(mu), load, out)
    return list(out), used


class RateEstimate:
    """rate_update() of rate_policy.h on one subflow's estimate."""

    def __init__(self) -> None:
        self.max = ctypes.c_uint64(0)
        self.stamp_ms = ctypes.c_uint32(0)

    def update(self, sample: int, guess: int, now_ms: int) -> int:
        return int(load_harness().harness_rate_update(
            ctypes.byref(self.max), ctypes.byref(self.stamp_ms), sample, guess, now_ms & 0xFFFFFFFF))


def bernoulli_fixed(permille: int, n: int) -> list[int]:
    lib = load_harness()
    out = (ctypes.c_uint32 * n)()
    lib.harness_bern_fixed_weights(permille, n, out)
    return list(out)


def bernoulli_bounded_pick(arrival_us: list[int], pick: int, lag_us: int) -> int:
    """bern_bounded_pick: the drawn path, or the earliest if it lags by more than lag_us."""
    n = len(arrival_us)
    return int(load_harness().harness_bern_bounded_pick((ctypes.c_uint64 * n)(*arrival_us), n,
                                                        pick, lag_us))


def delaybal_earliest(queued: list[int], rate: list[int], owd_us: list[int], size: int,
                      usable: int | None = None) -> int:
    """dbal_earliest over paths given as parallel lists; all usable by default."""
    lib = load_harness()
    n = len(queued)
    return int(lib.harness_dbal_earliest((ctypes.c_uint64 * n)(*queued), (ctypes.c_uint64 * n)(*rate),
                                         (ctypes.c_uint32 * n)(*owd_us), n, size,
                                         (1 << n) - 1 if usable is None else usable))


def delaybal_wait_pays(best: tuple[int, int, int], now: tuple[int, int, int], size: int,
                       pending: int) -> bool:
    """dbal_wait_pays; each path given as (queued, rate, owd_us)."""
    lib = load_harness()
    paths = (best, now)
    return bool(lib.harness_dbal_wait_pays((ctypes.c_uint64 * 2)(*(p[0] for p in paths)),
                                           (ctypes.c_uint64 * 2)(*(p[1] for p in paths)),
                                           (ctypes.c_uint32 * 2)(*(p[2] for p in paths)),
                                           size, pending))
