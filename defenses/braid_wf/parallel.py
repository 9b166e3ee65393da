"""Worker processes for the CPU stages (synthetic loads, defence
simulation, feature extraction): numpy and Python, one trace at a time, so
they scale with processes, not threads.

Workers are started with the ``forkserver`` method (``spawn`` where there is
none): a forked copy of a process that has initialised JAX (its threads,
a GPU context) is not safe, and the evaluation trains the deep attacks in
the parent while workers simulate the next defence. Workers import
braid_wf's numpy-only modules, never JAX, and ignore SIGINT, so that an
interrupted run (``timeout -s INT``) is handled by the parent alone.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any, TypeVar

T = TypeVar("T")


def default_jobs() -> int:
    return os.cpu_count() or 1


def _quiet_worker() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def workers(jobs: int) -> Iterator[Executor | None]:
    """A process pool of ``jobs`` workers, or None for ``jobs`` <= 1 (the
    caller then runs the work itself)."""
    if jobs <= 1:
        yield None
        return
    methods = multiprocessing.get_all_start_methods()
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_quiet_worker) as pool:
        try:
            yield pool
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def submit(pool: Executor | None, fn: Callable[..., T], *args: Any) -> Future[T]:
    """``fn(*args)`` in the pool, or here and now without one."""
    if pool is not None:
        return pool.submit(fn, *args)
    done: Future[T] = Future()
    done.set_result(fn(*args))
    return done


def chunks(n: int, parts: int, least: int = 16) -> list[range]:
    """0..n-1 in about ``parts`` contiguous ranges of at least ``least``."""
    size = max(least, -(-n // max(parts, 1)))
    return [range(i, min(i + size, n)) for i in range(0, n, size)]


def map_chunks(pool: Executor | None, fn: Callable[[Sequence[int]], list[T]], n: int, jobs: int) -> list[T]:
    """fn over 0..n-1 in chunks (four per worker), results in order."""
    futures = [submit(pool, fn, r) for r in chunks(n, 4 * jobs)]
    return [x for f in futures for x in f.result()]
