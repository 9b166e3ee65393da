"""What the kernel logged while a test ran: warnings, BUGs and oopses.

A scheduler defect often shows first as a ``WARN_ON_ONCE`` in the MPTCP
core while the transfer itself still completes; a fault test that does not
read the kernel log misses it. ``KernelLog`` reads ``/dev/kmsg`` from the
point it was opened, so only records logged since count (the ring buffer's
older records, or another test's, do not).

Usage::

    with KernelLog() as log:
        ...                        # the test
    assert not log.problems(), log.problems()
"""

from __future__ import annotations

import errno
import os
import re
from types import TracebackType
from typing import Self

# The kernel's own markers for a defect (include/asm-generic/bug.h,
# lib/bug.c, the oops and lockup reporters).
PROBLEM = re.compile(r"WARNING:|BUG:|kernel BUG|Oops|general protection fault|"
                     r"refcount_t:|INFO: task .* blocked|watchdog: .*lockup|Kernel panic")


class KernelLog:
    """Kernel log records from now on (needs root)."""

    def __init__(self, path: str = "/dev/kmsg") -> None:
        self.path = path
        self._fd = -1
        self._lines: list[str] = []

    def __enter__(self) -> Self:
        self._fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        os.lseek(self._fd, 0, os.SEEK_END)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.read()
        os.close(self._fd)
        self._fd = -1

    def read(self) -> list[str]:
        """Every message logged since the log was opened (so far)."""
        while self._fd >= 0:
            try:
                record = os.read(self._fd, 8192)
            except OSError as e:
                if e.errno == errno.EAGAIN:
                    break
                if e.errno == errno.EPIPE:  # overwritten before we read it
                    self._lines.append("(kernel log records lost: the ring buffer wrapped)")
                    continue
                raise
            if not record:
                break
            # "prio,seq,usec,flags;message\n continuation lines"
            self._lines.append(record.decode(errors="replace").split(";", 1)[-1].rstrip())
        return list(self._lines)

    def problems(self) -> list[str]:
        """The messages that report a kernel defect."""
        return [line for line in self.read() if PROBLEM.search(line)]
