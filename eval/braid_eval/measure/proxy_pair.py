"""braid-proxy on the standard testbed: its server on the proxy, its SOCKS5
client on the client, the MPTCP connections between them crossing both WANs.

Usage::

    with StandardTestbed("t") as tb, BraidProxyPair(tb, workdir) as pair:
        tb.client.run(["curl", "--socks5", pair.socks, ...])
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from types import TracebackType

from braid_testbed import StandardTestbed
from braid_testbed.netns import Namespace, stop_process
from braid_testbed.wait import IN_VM

REPO = Path(__file__).resolve().parents[3]
SERVER_PORT = 7443
SOCKS_PORT = 1080
# braid-proxy's key file: "<client id> <64 hex digits>" (proxy/README.md).
TEST_KEY = "box1 " + "5a" * 32 + "\n"
# Spare connections the client keeps (braid-proxy's preconnect, default 1):
# every user of this pair loads pages, whose objects a browser fetches over
# about 8 parallel connections. A spare joins its other subflows while idle
# (a round trip or two after it is dialled, under braid's schedulers), so a
# connection's first flight can follow the scheduler's split if it gets a
# joined spare (others are held for their join by hywf, which costs them a
# few round trips); 16 cover one page while the spares for the next join.
PAGE_LOAD_SPARES = 16


def proxy_binary() -> Path:
    """braid-proxy, prebuilt in ``BRAID_PROXY_BIN`` (the VM stages build it
    on the host: the guest's CPU is emulated), else built into out/."""
    prebuilt = os.environ.get("BRAID_PROXY_BIN")
    out = Path(prebuilt) if prebuilt else REPO / "out" / "proxy-bin"
    binary = out / "braid-proxy"
    if not prebuilt and IN_VM and not os.access(binary, os.X_OK):
        # A cold Go build under the guest's emulated CPU takes minutes; with
        # the host's build cache (shared through HOME) a rebuild is quick.
        raise FileNotFoundError(f"{binary} missing: build braid-proxy on the host first "
                                "(cd proxy && go build -o ../out/proxy-bin/ ./cmd/braid-proxy)")
    if not prebuilt:
        out.mkdir(parents=True, exist_ok=True)
        subprocess.run(["go", "build", "-o", str(out) + "/", "./cmd/braid-proxy"],
                       cwd=REPO / "proxy", check=True)
    if not os.access(binary, os.X_OK):
        raise FileNotFoundError(f"{binary} missing or not executable (BRAID_PROXY_BIN={prebuilt})")
    return binary


class BraidProxyPair:
    """braid-proxy server (proxy namespace) and client (client namespace)
    for the lifetime of a with-block; their logs stay in ``workdir``."""

    # spare connections ready for a page load's parallel connections
    DEFAULT_CLIENT_ARGS: tuple[str, ...] = ("-preconnect", str(PAGE_LOAD_SPARES))

    def __init__(self, tb: StandardTestbed, workdir: Path,
                 client_args: tuple[str, ...] = DEFAULT_CLIENT_ARGS,
                 server_args: tuple[str, ...] = ()) -> None:
        self.tb = tb
        self.workdir = workdir
        self.client_args = client_args
        self.server_args = server_args
        self.socks = f"127.0.0.1:{SOCKS_PORT}"
        self._procs: list[subprocess.Popen[bytes]] = []
        self.binary = Path()

    def __enter__(self) -> BraidProxyPair:
        self.binary = binary = proxy_binary()
        self.workdir.mkdir(parents=True, exist_ok=True)
        keys = self.workdir / "keys"
        fd = os.open(keys, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(TEST_KEY)
        server = f"{self.tb.proxy_ip}:{SERVER_PORT}"
        try:
            self._spawn(self.tb.proxy, "server.log",
                        [str(binary), "server", "-listen", server, "-key-file", str(keys),
                         # the page server lives in the testbed's private range
                         "-allow-cidr", "10.10.0.0/24", *self.server_args])
            self.tb.proxy.wait_listening(SERVER_PORT, self.tb.proxy_ip, timeout=60, proc=self._procs[-1])
            self.add_client(SOCKS_PORT, *self.client_args)
        except BaseException:
            self.close()
            raise
        return self

    def add_client(self, socks_port: int, *args: str) -> str:
        """Start a braid-proxy client (the pair starts one on SOCKS_PORT; a
        test may add others with different settings) and return its SOCKS
        address once it listens. Only the first serves metrics (their
        default port would clash)."""
        socks = f"127.0.0.1:{socks_port}"
        self._spawn(self.tb.client, f"client-{socks_port}.log",
                    [str(self.binary), "client", "-server", f"{self.tb.proxy_ip}:{SERVER_PORT}",
                     "-key-file", str(self.workdir / "keys"), "-socks-listen", socks,
                     *([] if socks_port == SOCKS_PORT else ["-metrics-listen", ""]), *args])
        self.tb.client.wait_listening(socks_port, "127.0.0.1", timeout=60, proc=self._procs[-1])
        return socks

    def _spawn(self, ns: Namespace, log: str, cmd: list[str]) -> None:
        with open(self.workdir / log, "wb") as out:
            self._procs.append(ns.popen(cmd, stdout=out, stderr=subprocess.STDOUT))

    def close(self) -> None:
        for proc in reversed(self._procs):
            stop_process(proc)
        self._procs.clear()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
