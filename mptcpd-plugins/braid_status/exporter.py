"""``braid exporter``'s HTTP server: ``/metrics`` answers with a fresh scrape.

Every request reads the sources again (a few ``/proc`` files, one
``ss`` and one ``ip`` run): nothing is cached, so a scrape is never
older than the request. stdlib ``http.server``, one thread per request.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TextIO

from .exposition import exposition
from .snapshot import take

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class ListenError(ValueError):
    """A --listen value that is not HOST:PORT, or not loopback without --allow-public."""


def parse_listen(text: str, allow_public: bool = False) -> tuple[str, int]:
    """``127.0.0.1:9477`` or ``[::1]:9477`` -> (host, port).

    >>> parse_listen("[::1]:9477")
    ('::1', 9477)
    """
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ListenError(f"--listen {text}: want HOST:PORT, e.g. 127.0.0.1:9477")
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:
        raise ListenError(f"--listen {text}: {host!r} is not an IP address") from None
    if not addr.is_loopback and not allow_public:
        raise ListenError(f"--listen {text}: not a loopback address; the metrics name the box's "
                          "gateways and addresses (--allow-public to serve them anyway)")
    return host, int(port)


def make_handler(status_file: str | None) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "braid-exporter"

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] == "/metrics":
                body, ctype, code = exposition(take(status_file)).encode(), CONTENT_TYPE, 200
            elif self.path == "/":
                body, ctype, code = b"braid exporter: see /metrics\n", "text/plain", 200
            else:
                body, ctype, code = b"not found; see /metrics\n", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass  # one line per scrape would flood the journal

    return Handler


class _Server(ThreadingHTTPServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class Exporter:
    """The server, bound at construction (``port`` 0 picks a free one)."""

    def __init__(self, host: str, port: int, status_file: str | None) -> None:
        server = _Server6 if ":" in host else _Server
        self.server = server((host, port), make_handler(status_file))

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def serve(self) -> None:
        self.server.serve_forever()

    def start(self) -> Callable[[], None]:
        """Serve from a thread; returns the function that stops it."""
        thread = threading.Thread(target=self.serve, name="braid exporter", daemon=True)
        thread.start()

        def stop() -> None:
            self.server.shutdown()
            self.server.server_close()
            thread.join()
        return stop


def run(listen: str, status_file: str | None, allow_public: bool, out: TextIO) -> None:
    """Serve until interrupted (``braid exporter``)."""
    host, port = parse_listen(listen, allow_public)
    exporter = Exporter(host, port, status_file)
    print(f"braid exporter: serving http://{listen.rsplit(':', 1)[0]}:{exporter.port}/metrics", file=out, flush=True)
    try:
        exporter.serve()
    except KeyboardInterrupt:
        pass
    finally:
        exporter.server.server_close()
