"""``braid exporter``'s HTTP server: ``/metrics`` answers with a fresh scrape;
``/`` is the status page, ``/api/status`` its JSON (``page``), ``/api/pages``
the recent page loads alone (what ``braid status`` reads).

Every scrape reads the sources again (a few ``/proc`` files, one ``ss``
and one ``ip`` run): nothing is cached, so a scrape is never older than
the request. The page's data comes from the sampling thread's history.
stdlib ``http.server``, one thread per request. With a password file
every path asks for HTTP basic authentication (any user name).
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any, TextIO

from .exposition import exposition
from .page import History
from .snapshot import take

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_URL = "http://127.0.0.1:9477"
_CLIENT_TIMEOUT_S = 3


#: The status page's files (package data), by the path they are served on.
PAGE_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/status.js": ("status.js", "text/javascript; charset=utf-8"),
    "/static/status.css": ("status.css", "text/css; charset=utf-8"),
    "/static/uPlot.iife.min.js": ("vendor/uPlot.iife.min.js", "text/javascript; charset=utf-8"),
    "/static/uPlot.min.css": ("vendor/uPlot.min.css", "text/css; charset=utf-8"),
}


class ListenError(ValueError):
    """A --listen value that is not HOST:PORT, or not loopback without --allow-public or a password."""


def read_password(path: str) -> str:
    """The first line of a password file; ValueError if it is empty."""
    with open(path) as f:
        password = f.readline().strip()
    if not password:
        raise ValueError(f"{path}: empty password file")
    return password


def page_file(name: str) -> bytes:
    return resources.files("braid_status").joinpath("page", name).read_bytes()


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
                          "gateways and addresses (--password-file to serve them with authentication, "
                          "--allow-public to serve the metrics without)")
    return host, int(port)


def is_loopback(host: str) -> bool:
    return ipaddress.ip_address(host).is_loopback


def make_handler(status_file: str | None, history: History | None = None,
                 password: str | None = None) -> type[BaseHTTPRequestHandler]:
    """The request handler: /metrics; with ``history``, the page and /api/status; with ``password``, auth."""
    class Handler(BaseHTTPRequestHandler):
        server_version = "braid-exporter"

        def authorized(self) -> bool:
            if password is None:
                return True
            kind, _, cred = self.headers.get("Authorization", "").partition(" ")
            try:
                given = base64.b64decode(cred, validate=True).decode().partition(":")[2]
            except ValueError:
                return False
            return kind.lower() == "basic" and hmac.compare_digest(given.encode(), password.encode())

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            headers: dict[str, str] = {}
            if not self.authorized():
                body, ctype, code = b"authentication required\n", "text/plain", 401
                headers["WWW-Authenticate"] = 'Basic realm="braid", charset="UTF-8"'
            elif path == "/metrics":
                pages = history.page_stats() if history is not None else None
                body, ctype, code = exposition(take(status_file), pages).encode(), CONTENT_TYPE, 200
            elif history is None and path == "/":
                body, ctype, code = b"braid exporter: see /metrics\n", "text/plain", 200
            elif history is not None and path in ("/api/status", "/api/pages"):
                data = history.as_json() if path == "/api/status" else history.pages_json()
                body, ctype, code = json.dumps(data).encode(), "application/json", 200
                headers["Cache-Control"] = "no-store"
            elif history is not None and path in PAGE_FILES:
                name, ctype = PAGE_FILES[path]
                body, code = page_file(name), 200
            else:
                body, ctype, code = b"not found; see /metrics\n", "text/plain", 404
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Content-Type-Options", "nosniff")
            for k, v in headers.items():
                self.send_header(k, v)
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

    def __init__(self, host: str, port: int, status_file: str | None, history: History | None = None,
                 password: str | None = None) -> None:
        server = _Server6 if ":" in host else _Server
        self.server = server((host, port), make_handler(status_file, history, password))

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


def run(listen: str, status_file: str | None, allow_public: bool, out: TextIO, *, page: bool = True,
        proxy_url: str | None = None, interval_s: float = 1.0, password_file: str | None = None,
        idle_ms: int | None = None, scope: int | None = None) -> None:
    """Serve until interrupted (``braid exporter``).

    A non-loopback address needs a password file (every path then asks
    for it) or ``allow_public`` (the metrics only, without the page).
    """
    password = read_password(password_file) if password_file else None
    host, port = parse_listen(listen, allow_public or password is not None)
    page = page and (password is not None or is_loopback(host))
    history = History(status_file, proxy_url, interval_s, idle_ms=idle_ms, scope=scope) if page else None
    exporter = Exporter(host, port, status_file, history, password)
    base = f"http://{listen.rsplit(':', 1)[0]}:{exporter.port}"
    print(f"braid exporter: serving {base}/metrics" + (f", status page {base}/" if history else ""),
          file=out, flush=True)
    stop_sampling = history.start() if history else None
    try:
        exporter.serve()
    except KeyboardInterrupt:
        pass
    finally:
        if stop_sampling:
            stop_sampling()
        exporter.server.server_close()


def read_pages(url: str = DEFAULT_URL, password: str | None = None) -> tuple[dict[str, Any] | None, str]:
    """A running exporter's recent page loads (its ``/api/pages``), or None and why not (one line).

    ``braid status`` runs once and has no history of its own; the
    exporter's sampler has. Environment proxies are not used (loopback).
    """
    req = urllib.request.Request(url.rstrip("/") + "/api/pages")
    if password is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(f"braid:{password}".encode()).decode())
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(req, timeout=_CLIENT_TIMEOUT_S) as resp:
            data = json.loads(resp.read(8 << 20))
    except urllib.error.HTTPError as e:
        if e.code == 401:
            return None, f"{url} asks for a password (--exporter-password-file FILE)"
        if e.code == 404:
            return None, f"{url} keeps no page history (an exporter started with --no-page or --allow-public)"
        return None, f"{url}: HTTP {e.code}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        return None, f"no braid exporter at {url} ({getattr(e, 'reason', None) or e})"
    if not isinstance(data, dict) or not isinstance(data.get("pages"), list):
        return None, f"{url}/api/pages: not braid exporter's page list"
    return data, ""
