"""Page loads through braid-proxy on the standard testbed, and what each
WAN's observer saw of every one of them.

A page load is ``pages.py``'s objects fetched in parallel through the
braid-proxy SOCKS client; each WAN is captured as its network's operator
sees it, and the capture is cut per page by the loader's wall-clock window.
The share of a page that WAN 1 carried, per direction, is what HyWF
randomises: one split per page load, drawn anew for the next.

Usage::

    with PageServer(tb), BraidProxyPair(tb, workdir) as pair:
        pages = traced_pages(tb, pair.socks, count=40)
    print([p.share(1, "down") for p in pages])
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path
from types import TracebackType

from braid_eval.proxy_pair import SERVER_PORT
from braid_testbed import StandardTestbed, ip
from braid_testbed.pcap import TcpPacket

PAGES_TOOL = Path(__file__).resolve().parent.parent / "braid_testbed" / "pages.py"
PAGE_PORT = 8080


class PageServer:
    """pages.py serving on the testbed's server (the Internet side)."""

    def __init__(self, tb: StandardTestbed) -> None:
        self.tb = tb
        self.address = f"{ip('server', 'inet')}:{PAGE_PORT}"
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> PageServer:
        self.proc = self.tb.server.popen(["python3", str(PAGES_TOOL), "serve", "--listen", self.address],
                                         stdout=subprocess.DEVNULL)
        self.tb.server.wait_listening(PAGE_PORT, ip("server", "inet"), timeout=60, proc=self.proc)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=5)


@dataclasses.dataclass
class PageTrace:
    """One page load: the loader's result and the relay's payload bytes per
    (WAN, direction), "up" towards the braid server, "down" from it."""

    result: dict[str, object]
    payload: dict[tuple[int, str], int]

    @property
    def seconds(self) -> float:
        return float(self.result["seconds"])  # type: ignore[arg-type]

    def share(self, wan: int, direction: str) -> float:
        total = sum(v for (w, d), v in self.payload.items() if d == direction)
        return self.payload[(wan, direction)] / total if total else float("nan")


def relay_payload(packets: list[TcpPacket], start: float, end: float, direction: str) -> int:
    """Payload of braid's relay connections in [start, end], one direction."""
    if direction == "up":
        return sum(p.payload_len for p in packets if start <= p.ts <= end and p.dport == SERVER_PORT)
    return sum(p.payload_len for p in packets if start <= p.ts <= end and p.sport == SERVER_PORT)


def traced_pages(tb: StandardTestbed, socks: str, count: int, extra: list[str] | None = None,
                 timeout_s: float = 1200) -> list[PageTrace]:
    """Load ``count`` pages through ``socks`` while capturing both WANs."""
    cmd = ["python3", str(PAGES_TOOL), "load", "--server", f"{ip('server', 'inet')}:{PAGE_PORT}",
           "--socks", socks, "--pages", str(count), *(extra or [])]
    with tb.capture_wan(1) as cap1, tb.capture_wan(2) as cap2:
        proc = tb.client.run(cmd, check=False, timeout=timeout_s)
    results = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or len(results) != count:
        raise RuntimeError(f"page loads failed ({proc.returncode}): {proc.stderr.strip()[-800:]}")
    captured = {1: cap1.packets, 2: cap2.packets}
    traces = []
    for r in results:
        start, end = float(r["start"]), float(r["end"])
        traces.append(PageTrace(r, {(w, d): relay_payload(pk, start, end, d)
                                    for w, pk in captured.items() for d in ("up", "down")}))
    cap1.cleanup()
    cap2.cleanup()
    return traces
