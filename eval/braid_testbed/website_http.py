#!/usr/bin/env python3
"""The website-fingerprinting corpus as real web pages, for a browser.

``websites.py`` describes each load of a site as an HTML document and 1-3
waves of sub-resources, and its own loader fetches them over pages.py's
protocol. This module serves the same loads over HTTP/1.1 so that a real
browser engine can load them: the HTML names the first wave's objects,
and each object of a wave names its share of the next wave's, so the
browser discovers the waves the way it discovers a site's scripts and the
images they add.

- ``/SITE-INSTANCE/`` is the load's HTML (wave 0). If a second wave
  follows, the first wave's objects are ``<script>`` elements in the head
  (fetched in parallel, run in order); otherwise ``<img>`` elements.
- ``/SITE-INSTANCE/W-K.js`` is a script: object K of wave W. When it runs
  it inserts the objects K, K + n, K + 2n ... of wave W + 1 (n: the size of
  wave W): scripts if another wave follows them, else images.
- ``/SITE-INSTANCE/W-K.png`` is an image of the object's size (a valid PNG:
  a browser cancels an image that does not decode).

Every body has its object's size, padded with a comment, unless the
markup that names the next wave is longer (a small script naming many
objects). Requests are the browser's own (its headers, no body), not the
synthetic loader's drawn request sizes. Responses are ``no-store``.

With ``--log FILE`` every response sent in full is one JSON line there:
``{"load": "3-7", "object": "1-2", "bytes": 5120, "time": ..., "peer":
"10.0.0.1:40312"}``, so a loader can check that a load fetched every
object (and count the connections it used).

Usage::

    website_http.py serve --listen 10.10.0.2:8081 --log served.jsonl
    website_http.py page --load 3-7          # the HTML of load 3-7
"""

from __future__ import annotations

import argparse
import json
import re
import struct
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TextIO

if __package__:
    from . import pages, websites
else:  # run as a script: its siblings sit beside this file
    import pages  # type: ignore[no-redef]
    import websites  # type: ignore[no-redef]

PATH = re.compile(r"^/(\d+)-(\d+)/(?:(\d+)-(\d+)\.(js|png))?$")


def object_url(load: str, wave: int, index: int, script: bool) -> str:
    return f"/{load}/{wave}-{index}.{'js' if script else 'png'}"


def named_by(waves: list[websites.Wave], wave: int, index: int) -> list[int]:
    """Which objects of wave ``wave + 1`` object ``index`` of ``wave`` names
    (the HTML, wave 0, names the whole first wave)."""
    if wave + 1 >= len(waves):
        return []
    return list(range(index, len(waves[wave + 1]), len(waves[wave])))


def padded(text: str, size: int, open_comment: str, close_comment: str) -> bytes:
    """``text`` followed by a comment that makes it ``size`` bytes (or no
    comment if ``text`` alone is that long)."""
    room = size - len(text) - len(open_comment) - len(close_comment)
    if room < 0:
        return text.encode()
    return (text + open_comment + "x" * room + close_comment).encode()


def html(load: str, waves: list[websites.Wave]) -> bytes:
    size = waves[0][0][0]
    script = len(waves) > 2
    urls = [object_url(load, 1, k, script) for k in range(len(waves[1]))] if len(waves) > 1 else []
    head = "".join(f'<script src="{u}"></script>' for u in urls) if script else ""
    body = "" if script else "".join(f'<img src="{u}" alt="">' for u in urls)
    text = (f'<!doctype html><html><head><meta charset="utf-8"><title>{load}</title>{head}</head>'
            f"<body>{body}</body></html>")
    return padded(text, size, "<!--", "-->")


def script(load: str, waves: list[websites.Wave], wave: int, index: int) -> bytes:
    """A script that inserts the objects it names into the document."""
    nxt = wave + 1
    child_script = nxt + 1 < len(waves)
    urls = [object_url(load, nxt, k, child_script) for k in named_by(waves, wave, index)]
    tag = "script" if child_script else "img"
    text = (f"(function(){{var d=document.documentElement;{json.dumps(urls)}.forEach(function(u){{"
            f"var e=document.createElement('{tag}');e.src=u;d.appendChild(e);}});}})();\n")
    return padded(text, waves[wave][index][0], "/*", "*/")


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


# A 1x1 grey PNG: its header, its pixel and its end; the filler chunk goes
# between header and pixel, so the image is whole only at its last byte.
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_PNG_HEADER = _png_chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 0, 0, 0, 0))
_PNG_PIXEL = _png_chunk(b"IDAT", zlib.compress(b"\x00\x80"))
_PNG_END = _png_chunk(b"IEND", b"")
_PNG_FIXED = len(_PNG_SIGNATURE) + len(_PNG_HEADER) + 12 + len(_PNG_PIXEL) + len(_PNG_END)


def image(size: int) -> bytes:
    """A valid PNG of ``size`` bytes (at least its fixed parts, under 100):
    a browser cancels an image whose first bytes do not decode, so an
    object of random bytes would cross the network only in part. The
    filler is a private ancillary chunk (``brAd``, which decoders skip) of
    incompressible bytes."""
    filler = pages.object_bytes(max(0, size - _PNG_FIXED))
    return _PNG_SIGNATURE + _PNG_HEADER + _png_chunk(b"brAd", filler) + _PNG_PIXEL + _PNG_END


def body_of(path: str, seed: int, profile: str = "small") -> tuple[bytes, str] | None:
    """The body and content type at ``path``, or None if there is none."""
    m = PATH.match(path.split("?", 1)[0])
    if not m:
        return None
    site, instance = int(m[1]), int(m[2])
    load = f"{site}-{instance}"
    waves = websites.load_waves(site, instance, seed, profile)
    if m[3] is None:
        return html(load, waves), "text/html; charset=utf-8"
    wave, index, ext = int(m[3]), int(m[4]), m[5]
    if not 1 <= wave < len(waves) or index >= len(waves[wave]):
        return None
    if (ext == "js") != (wave + 1 < len(waves)):
        return None
    if ext == "js":
        return script(load, waves, wave, index), "application/javascript"
    return image(waves[wave][index][0]), "image/png"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # persistent connections, as browsers use
    seed = 1
    profile = "small"
    log_lock = threading.Lock()
    log_file: TextIO | None = None

    def do_GET(self) -> None:
        found = body_of(self.path, self.seed, self.profile)
        body, ctype = found if found else (b"not found\n", "text/plain")
        self.send_response(200 if found else 404)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        m = PATH.match(self.path.split("?", 1)[0])
        if found and m and self.log_file is not None:
            line = json.dumps({"load": f"{m[1]}-{m[2]}", "object": f"{m[3]}-{m[4]}" if m[3] else "0-0",
                               "bytes": len(body), "time": time.time(),
                               "peer": f"{self.client_address[0]}:{self.client_address[1]}"})
            with self.log_lock:
                self.log_file.write(line + "\n")
                self.log_file.flush()

    def log_message(self, format: str, *args: object) -> None:
        pass  # the served log is the record; stderr stays quiet


class Server(ThreadingHTTPServer):
    daemon_threads = True
    # socketserver's default backlog is 5: a browser's six connections at
    # once on a busy machine would overflow it, and each dropped SYN puts
    # a second's retransmission into the load's trace (pages.py's server
    # listens with 256 too).
    request_queue_size = 256

    def handle_error(self, request: object, client_address: object) -> None:
        # A browser resets its keep-alive connections when a load's
        # context closes: routine, not worth a traceback.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


def serve(listen: tuple[str, int], seed: int, profile: str, log_path: str | None) -> None:
    Handler.seed, Handler.profile = seed, profile
    if log_path:
        Handler.log_file = open(log_path, "a", buffering=1)
    server = Server(listen, Handler)
    print(f"listening on {listen[0]}:{listen[1]}", flush=True)
    server.serve_forever()


def object_paths(site: int, instance: int, seed: int, profile: str = "small") -> dict[str, str]:
    """Every object a complete load fetches, by name (``W-K``; the HTML is
    ``0-0``), with its path on the server."""
    load = f"{site}-{instance}"
    waves = websites.load_waves(site, instance, seed, profile)
    return {"0-0": f"/{load}/"} | {f"{w}-{k}": object_url(load, w, k, w + 1 < len(waves))
                                   for w in range(1, len(waves)) for k in range(len(waves[w]))}


def objects_of(site: int, instance: int, seed: int, profile: str = "small") -> dict[str, int]:
    """Every object a complete load fetches, by name, with the bytes the
    server sends for it (its body)."""
    out = {}
    for name, path in object_paths(site, instance, seed, profile).items():
        found = body_of(path, seed, profile)
        assert found is not None
        out[name] = len(found[0])
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("serve", help="serve the corpus over HTTP until killed")
    s.add_argument("--listen", type=pages.parse_hostport, required=True, help="HOST:PORT")
    s.add_argument("--log", help="append one JSON line per response sent in full")
    s.add_argument("--seed", type=int, default=1, help="corpus seed (default 1)")
    s.add_argument("--profile", choices=websites.PROFILES, default="small",
                   help="how sites are made, as websites.py's --profile (default small)")
    p = sub.add_parser("page", help="print a load's HTML")
    p.add_argument("--load", type=websites.parse_load, required=True, help="SITE-INSTANCE")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--profile", choices=websites.PROFILES, default="small")
    args = parser.parse_args()
    if args.cmd == "serve":
        serve(args.listen, args.seed, args.profile, args.log)
        return 0
    site, instance = args.load
    sys.stdout.write(html(f"{site}-{instance}", websites.load_waves(site, instance, args.seed, args.profile)).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
