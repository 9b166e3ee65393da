"""The website-fingerprinting corpus on the standard testbed: its server
(``websites.py serve`` in the server namespace) and page loads through a
SOCKS proxy (``websites.py load`` in the client namespace, one JSON line per
load). Shared by ``wf collect`` and ``braid_eval.bench.pageload --corpus`` so that both
load the same pages the same way; no numpy here, the benchmark does without.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from typing import Any

from braid_testbed import TOOLS_DIR, StandardTestbed, ip
from braid_testbed.netns import stop_process

WEBSITES = TOOLS_DIR / "websites.py"
PORT = 8080


def server_address() -> str:
    return f"{ip('server', 'inet')}:{PORT}"


@contextlib.contextmanager
def corpus_server(tb: StandardTestbed) -> Iterator[str]:
    """The corpus served on the server namespace; yields its address."""
    srv = tb.server.popen(["python3", str(WEBSITES), "serve", "--listen", server_address()],
                          stdout=subprocess.DEVNULL)
    try:
        tb.server.wait_listening(PORT, ip("server", "inet"), timeout=60, proc=srv)
        yield server_address()
    finally:
        stop_process(srv)


def load_pages(tb: StandardTestbed, socks: str, loads: list[tuple[int, int]], gap_ms: int,
               extra: tuple[str, ...] = ()) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """Loads ``loads`` (site, instance) one after another through ``socks``,
    ``gap_ms`` apart; returns the loader's process and its per-load results
    (``ok``, ``site``, ``instance``, ``start``, ``end``, ``seconds``...). The
    caller decides what a failed load means."""
    cmd = ["python3", str(WEBSITES), "load", "--server", server_address(), "--socks", socks,
           "--gap-ms", str(gap_ms), *extra, "--loads", *[f"{s}-{i}" for s, i in loads]]
    proc = tb.client.run(cmd, check=False, timeout=120 + 30 * len(loads))
    return proc, [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
