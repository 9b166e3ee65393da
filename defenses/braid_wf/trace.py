"""Website-fingerprinting traces: the format the WF literature uses, datasets
of them on disk, and what one network's observer captured turned into one.

A trace is one page load as a passive observer sees it: per packet (or Tor
cell) its time since the load began and its direction, with its size when
known. Outgoing (client to the Internet) is positive, incoming negative, as
in Wang et al. (2014), Panchenko et al. (2016) and Hayes & Danezis (2016).

On disk a trace is a text file, one packet a line::

    0.000000<TAB>600         # time, direction*size (bytes)
    0.031000<TAB>-1448
or, for cell traces, ``time<TAB>1`` / ``time<TAB>-1``.

A dataset is a directory of such files named as in Wang's and Hayes's
published datasets: ``<site>-<instance>`` for monitored loads (site 0..M-1),
``<n>`` for the open world's unmonitored loads (one load per site). An
optional extension (``.cell``, ``.txt``) and ``_`` instead of ``-`` are
accepted when reading.

Usage::

    ds = load_dataset(Path("wang-knn"))       # published traces
    save_dataset(ds, Path("out/wf/default/wan1"))
    tr = trace_from_packets(packets, client_ips={"10.0.1.2"}, start=t0, end=t1)
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

CELL_SIZE = 512
_NAME = re.compile(r"^(?P<site>\d+)(?:[-_](?P<inst>\d+))?(?:\.[A-Za-z0-9]+)?$")


class Packet(Protocol):
    """What a trace needs of a captured packet (braid_testbed.pcap.TcpPacket)."""

    @property
    def ts(self) -> float: ...
    @property
    def src(self) -> str: ...
    @property
    def dst(self) -> str: ...
    @property
    def sport(self) -> int: ...
    @property
    def dport(self) -> int: ...
    @property
    def payload_len(self) -> int: ...


@dataclasses.dataclass
class Trace:
    """One page load: ``times`` (s, from 0) and signed ``sizes`` (+out, -in)."""

    times: npt.NDArray[np.float64]
    sizes: npt.NDArray[np.int64]

    def __post_init__(self) -> None:
        self.times = np.asarray(self.times, dtype=np.float64)
        self.sizes = np.asarray(self.sizes, dtype=np.int64)
        if self.times.shape != self.sizes.shape or self.times.ndim != 1:
            raise ValueError("trace times and sizes must be 1-D of equal length")

    def __len__(self) -> int:
        return len(self.times)

    @property
    def directions(self) -> npt.NDArray[np.int64]:
        return np.sign(self.sizes).astype(np.int64)

    @property
    def total_bytes(self) -> int:
        return int(np.abs(self.sizes).sum())

    @property
    def duration(self) -> float:
        """Seconds from the first packet to the last (0 for an empty trace)."""
        return float(self.times[-1] - self.times[0]) if len(self.times) else 0.0

    def cells(self, cell_size: int = CELL_SIZE) -> Trace:
        """The same load counted in fixed-size cells (each packet becomes
        ceil(size / cell_size) cells of +-1 at its time), as an observer of
        Tor sees it."""
        counts = np.maximum(1, np.ceil(np.abs(self.sizes) / cell_size)).astype(np.int64)
        return Trace(np.repeat(self.times, counts), np.repeat(self.directions, counts))


@dataclasses.dataclass
class Dataset:
    """Labelled traces: ``labels[i]`` is the site of ``traces[i]``, -1 for
    an unmonitored (open-world) load."""

    traces: list[Trace]
    labels: list[int]
    names: list[str] = dataclasses.field(default_factory=list)

    def __post_init__(self) -> None:
        if len(self.traces) != len(self.labels):
            raise ValueError("one label per trace")
        if not self.names:
            self.names = [str(i) for i in range(len(self.traces))]

    @property
    def monitored(self) -> int:
        return len({label for label in self.labels if label >= 0})

    def subset(self, idx: Iterable[int]) -> Dataset:
        ids = list(idx)
        return Dataset([self.traces[i] for i in ids], [self.labels[i] for i in ids],
                       [self.names[i] for i in ids])


def format_trace(trace: Trace) -> str:
    return "".join(f"{t:.6f}\t{int(s)}\n" for t, s in zip(trace.times, trace.sizes, strict=True))


def parse_trace(text: str, source: str = "<trace>", rebase: bool = True) -> Trace:
    """A trace from ``time<TAB>direction*size`` lines (any whitespace),
    its times from its first packet (``rebase``) or as written (the
    captures of one load's networks share the load's start)."""
    times: list[float] = []
    sizes: list[int] = []
    for n, line in enumerate(text.splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 2:
            raise ValueError(f"{source}:{n}: expected 'time<TAB>size', got {line!r}")
        try:
            t, s = float(fields[0]), int(float(fields[1]))
        except ValueError:
            raise ValueError(f"{source}:{n}: not numbers: {line!r}")
        if s == 0 or not math.isfinite(t):
            raise ValueError(f"{source}:{n}: size must be non-zero and time finite: {line!r}")
        times.append(t)
        sizes.append(s)
    order = np.argsort(np.asarray(times), kind="stable")
    arr_t = np.asarray(times)[order]
    return Trace(arr_t - (arr_t[0] if rebase and len(arr_t) else 0.0), np.asarray(sizes)[order])


def write_trace(trace: Trace, path: Path) -> None:
    """Write atomically (a crash leaves no half file that a resume would keep)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(format_trace(trace))
    tmp.replace(path)


def read_trace(path: Path, rebase: bool = True) -> Trace:
    return parse_trace(path.read_text(), str(path), rebase)


def trace_name(site: int, instance: int | None) -> str:
    """``site-instance`` for a monitored load, ``n`` for an unmonitored one."""
    return str(site) if instance is None else f"{site}-{instance}"


def parse_name(name: str) -> tuple[int, int | None] | None:
    """(site, instance) from a dataset file name; None if not a trace file."""
    m = _NAME.match(name)
    if not m:
        return None
    return int(m["site"]), (int(m["inst"]) if m["inst"] is not None else None)


def load_dataset(root: Path, max_sites: int | None = None, max_instances: int | None = None,
                 max_unmonitored: int | None = None, skip_empty: bool = True) -> Dataset:
    """Every trace in ``root`` (Wang/Hayes naming). Unmonitored files
    (``n``) get label -1. Files that are not named like traces are ignored;
    a file named like one that does not parse is an error."""
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: not a dataset directory")
    mon: list[tuple[int, int, Path]] = []
    unmon: list[tuple[int, Path]] = []
    for path in root.iterdir():
        parsed = parse_name(path.name) if path.is_file() else None
        if parsed is None:
            continue
        site, inst = parsed
        if inst is None:
            unmon.append((site, path))
        else:
            mon.append((site, inst, path))
    mon.sort()
    unmon.sort()
    if max_sites is not None:
        keep = sorted({s for s, _, _ in mon})[:max_sites]
        mon = [m for m in mon if m[0] in set(keep)]
    if max_instances is not None:
        mon = [m for m in mon if m[1] < max_instances]
    if max_unmonitored is not None:
        unmon = unmon[:max_unmonitored]
    ds = Dataset([], [], [])
    for site, inst, path in mon:
        tr = read_trace(path)
        if skip_empty and len(tr) == 0:
            continue
        ds.traces.append(tr)
        ds.labels.append(site)
        ds.names.append(trace_name(site, inst))
    for n, path in unmon:
        tr = read_trace(path)
        if skip_empty and len(tr) == 0:
            continue
        ds.traces.append(tr)
        ds.labels.append(-1)
        ds.names.append(trace_name(n, None))
    if not ds.traces:
        raise ValueError(f"{root}: no traces (expected files named <site>-<instance> or <n>)")
    return ds


def save_dataset(ds: Dataset, root: Path) -> None:
    """Write ``ds`` in the published layout. Unmonitored loads are numbered
    in order; monitored ones keep their site and get instances in order."""
    root.mkdir(parents=True, exist_ok=True)
    seen: dict[int, int] = {}
    unmon = 0
    for tr, label in zip(ds.traces, ds.labels, strict=True):
        if label < 0:
            name = trace_name(unmon, None)
            unmon += 1
        else:
            name = trace_name(label, seen.get(label, 0))
            seen[label] = seen.get(label, 0) + 1
        write_trace(tr, root / name)


def trace_from_packets(packets: Sequence[Packet], client_ips: set[str], start: float, end: float,
                       port: int | None = None, include_acks: bool = False,
                       segment: int | None = None) -> Trace:
    """What one network's observer saw of a page load, from its capture.

    Packets in [start, end] (the load's window) between one of the client's
    addresses and anything else; with ``port``, only the connections to or
    from that port (braid's relay). Direction is relative to the client;
    the size is the TCP payload (pure ACKs are left out unless
    ``include_acks``: the WF attacks model data packets, and ACK counts
    mostly mirror the other direction's). With ``segment``, a captured
    packet larger than that (segmentation offload on veth hands tcpdump
    packets of several MSS) counts as the MSS-sized packets the wire would
    carry, all at its time."""
    times: list[float] = []
    sizes: list[int] = []
    for p in packets:
        if not start <= p.ts <= end:
            continue
        if port is not None and port not in (p.sport, p.dport):
            continue
        if p.src in client_ips:
            sign = 1
        elif p.dst in client_ips:
            sign = -1
        else:
            continue
        size = p.payload_len
        if size == 0:
            if not include_acks:
                continue
            size = 1
        while segment and size > segment:
            times.append(p.ts)
            sizes.append(sign * segment)
            size -= segment
        times.append(p.ts)
        sizes.append(sign * size)
    order = np.argsort(np.asarray(times, dtype=np.float64), kind="stable")
    t = np.asarray(times, dtype=np.float64)[order]
    return Trace(t - start, np.asarray(sizes, dtype=np.int64)[order])
