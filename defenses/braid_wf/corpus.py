"""The website-fingerprinting corpus on a testbed: its server
(``websites.py serve`` in the server's namespace, or ``website_http.py
serve``: the same loads as web pages, for a browser) and page loads
through a SOCKS proxy (``websites.py load`` in the client's namespace, one
JSON line per load; with ``--browser``, headless Chromium). Shared by
``wf collect`` (through braid-proxy on the standard testbed, or through Tor in Tor mode's private network) and
``braid_eval.bench.pageload --corpus``, so that all load the same pages the
same way; no numpy here, the benchmark does without.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from braid_testbed import TOOLS_DIR, ip
from braid_testbed.netns import Namespace, stop_process
from braid_testbed.wait import scaled

WEBSITES = TOOLS_DIR / "websites.py"
WEBSITE_HTTP = TOOLS_DIR / "website_http.py"
PORT = 8080


def server_address() -> str:
    """Where the standard testbed's server namespace serves the corpus."""
    return f"{ip('server', 'inet')}:{PORT}"


def browser_args(served_log: Path) -> tuple[str, ...]:
    """``load_pages``' extra arguments for the browser, given the web
    server's log (:func:`corpus_server`'s ``served_log``)."""
    return ("--browser", "--served-log", str(served_log))


def generator_args(seed: int, profile: str) -> tuple[str, ...]:
    """The arguments of ``websites.py load`` and ``website_http.py serve``
    that choose the corpus's sites: its seed and profile."""
    return ("--seed", str(seed), "--profile", profile)


@contextlib.contextmanager
def corpus_server(ns: Namespace, address: str, served_log: Path | None = None,
                  generator: tuple[str, ...] = ()) -> Iterator[str]:
    """The corpus served in namespace ``ns`` on ``address`` (HOST:PORT,
    e.g. :func:`server_address`); yields the address. With ``served_log``
    the same loads are served as web pages over HTTP, each response sent
    in full logged there (a browser's loads are checked against it), of
    the sites ``generator`` (:func:`generator_args`) makes."""
    host, port = address.rsplit(":", 1)
    cmd = ["python3", str(WEBSITES), "serve", "--listen", address] if served_log is None else \
        ["python3", str(WEBSITE_HTTP), "serve", "--listen", address, "--log", str(served_log), *generator]
    srv = ns.popen(cmd, stdout=subprocess.DEVNULL)
    try:
        ns.wait_listening(int(port), host, timeout=scaled(60), proc=srv)
        yield address
    finally:
        stop_process(srv)


def load_pages(client: Namespace, server: str, socks: str, loads: list[tuple[int, int]], gap_ms: int,
               extra: tuple[str, ...] = (), per_load_s: float = 30
               ) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """Loads ``loads`` (site, instance) of the corpus at ``server`` one
    after another from namespace ``client`` through ``socks``, ``gap_ms``
    apart, allowing ``per_load_s`` each; returns the loader's process and
    its per-load results (``ok``, ``site``, ``instance``, ``start``,
    ``end``, ``seconds``...). The caller decides what a failed load means."""
    cmd = ["python3", str(WEBSITES), "load", "--server", server, "--socks", socks,
           "--gap-ms", str(gap_ms), *extra, "--loads", *[f"{s}-{i}" for s, i in loads]]
    proc = client.run(cmd, check=False, timeout=120 + per_load_s * len(loads))
    return proc, [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
