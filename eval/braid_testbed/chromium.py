#!/usr/bin/env python3
"""Page loads in a real browser engine: Debian's headless Chromium, driven
over the DevTools protocol on a pipe (``--remote-debugging-pipe``: JSON
messages ending in a NUL byte, the browser reading fd 3 and writing fd 4),
so no driver library or websocket is needed.

One browser serves many loads; each load gets a fresh browser context (an
incognito profile: empty cache and cookies, its own connections, closed
with it), as a fingerprinting corpus's loads are independent visits.

Standalone on purpose, like pages.py: it runs inside network namespaces
beside the loaders it stands in for.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

BINARY = "/usr/bin/chromium"

# The browser's own traffic off (component updates, safe browsing,
# metrics, translation, field trials), so that a capture holds the pages'.
QUIET_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--disable-domain-reliability",
    "--disable-client-side-phishing-detection", "--disable-breakpad", "--metrics-recording-only",
    "--no-pings", "--disable-field-trial-config", "--disable-dev-shm-usage",
    "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,"
    "CertificateTransparencyComponentUpdater,InterestFeedContentSuggestions",
)


class BrowserError(RuntimeError):
    pass


class Load(NamedTuple):
    """One page load: when it started and when its load event came (wall
    clock), and per URL what the browser received: the bytes of each
    request it finished (headers and body, as they came off the network)
    and the reason for each it gave up (a cancelled or failed request)."""

    start: float
    end: float
    finished: dict[str, int]
    failed: dict[str, str]


def received(events: list[dict[str, Any]]) -> tuple[dict[str, int], dict[str, str]]:
    """The finished and failed requests among a load's Network events."""
    urls: dict[str, str] = {}
    finished: dict[str, int] = {}
    failed: dict[str, str] = {}
    for event in events:
        params = event.get("params", {})
        method = event.get("method")
        if method == "Network.requestWillBeSent":
            urls[params["requestId"]] = params["request"]["url"]
        elif method == "Network.loadingFinished" and params["requestId"] in urls:
            url = urls[params["requestId"]]
            finished[url] = finished.get(url, 0) + int(params["encodedDataLength"])
        elif method == "Network.loadingFailed" and params["requestId"] in urls:
            failed[urls[params["requestId"]]] = params.get("errorText", "") + (
                " (cancelled)" if params.get("canceled") else "")
    return finished, failed


class Chromium:
    """A headless Chromium whose every connection goes through ``socks``
    (HOST:PORT of a SOCKS5 proxy; None: direct)."""

    def __init__(self, socks: str | None = None, binary: str = BINARY) -> None:
        if not os.access(binary, os.X_OK):
            raise BrowserError(f"{binary}: no Chromium here (scripts/install-deps installs Debian's)")
        self._profile = tempfile.mkdtemp(prefix="braid-chromium-")
        self._stderr = open(os.path.join(self._profile, "stderr.log"), "w+b")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        proxy = (f"--proxy-server=socks5://{socks}", "--proxy-bypass-list=<-loopback>") if socks else ()

        def pipe_fds() -> None:  # the child's fds 3 and 4, as the browser expects
            # Copies first: either pipe end may itself be fd 3 or 4, and
            # dup2 onto itself would leave it close-on-exec.
            read_end, write_end = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(read_end, 3)
            os.dup2(write_end, 4)

        self._proc = subprocess.Popen(
            [binary, *QUIET_FLAGS, *proxy, "--remote-debugging-pipe", f"--user-data-dir={self._profile}",
             "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._stderr,
            preexec_fn=pipe_fds, close_fds=False)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._next_id = 0
        self._replies: dict[int, queue.Queue[dict[str, Any]]] = {}
        self._events: queue.Queue[dict[str, Any]] = queue.Queue()
        self._lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()
        try:
            self.version = self.call("Browser.getVersion", timeout=60)["product"]
        except BrowserError as err:
            said = self._said()
            self.close()
            raise BrowserError(f"{binary} did not start ({err}); it said: {said}") from None

    def _said(self) -> str:
        """The end of what the browser wrote on stderr, without D-Bus's
        complaints (there is no session bus here, and none is needed)."""
        self._stderr.seek(0)
        lines = [x for x in self._stderr.read().decode(errors="replace").splitlines() if "dbus" not in x]
        return " | ".join(lines[-6:]) or "nothing"

    def _read(self) -> None:
        buf = b""
        while True:
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                with self._lock:
                    for waiting in self._replies.values():
                        waiting.put({"error": {"message": "the browser closed its pipe"}})
                return
            buf += chunk
            *messages, buf = buf.split(b"\0")
            for raw in messages:
                msg = json.loads(raw)
                if "id" in msg:
                    with self._lock:
                        reply = self._replies.pop(msg["id"], None)
                    if reply is not None:
                        reply.put(msg)
                else:
                    self._events.put(msg)

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout: float = 30) -> dict[str, Any]:
        """One DevTools command; its result, or BrowserError."""
        with self._lock:
            self._next_id += 1
            ident = self._next_id
            reply: queue.Queue[dict[str, Any]] = queue.Queue()
            self._replies[ident] = reply
        msg: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        try:
            os.write(self._to_browser, json.dumps(msg).encode() + b"\0")
        except BrokenPipeError:
            raise BrowserError(f"{method}: the browser closed its pipe") from None
        try:
            answer = reply.get(timeout=timeout)
        except queue.Empty:
            raise BrowserError(f"{method}: no answer in {timeout:.0f} s") from None
        if "error" in answer:
            raise BrowserError(f"{method}: {answer['error'].get('message')}")
        result: dict[str, Any] = answer.get("result", {})
        return result

    def _wait_event(self, session: str, deadline: float,
                    is_it: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Wait for the session's event that ``is_it``; returns the
        session's other events that came before it, in order."""
        passed: list[dict[str, Any]] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("no load event before the load's deadline")
            try:
                event = self._events.get(timeout=left)
            except queue.Empty:
                continue
            if event.get("sessionId") != session:
                continue
            if is_it(event):
                return passed
            passed.append(event)

    def load(self, url: str, timeout: float = 30) -> Load:
        """Load ``url`` in a fresh context until its load event (every object
        the page and its scripts added is in): when the navigation started
        and the load event came (wall clock), and what the browser received
        of each request."""
        ctx = self.call("Target.createBrowserContext")["browserContextId"]
        try:
            target = self.call("Target.createTarget", {"url": "about:blank", "browserContextId": ctx})["targetId"]
            session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            self.call("Page.enable", session=session)
            self.call("Page.setLifecycleEventsEnabled", {"enabled": True}, session=session)
            self.call("Network.enable", session=session)
            deadline = time.monotonic() + timeout
            start = time.time()
            navigated = self.call("Page.navigate", {"url": url}, session=session, timeout=timeout)
            if navigated.get("errorText") or not navigated.get("loaderId"):
                raise BrowserError(f"{url}: {navigated.get('errorText') or 'not navigated to'}")
            loader = navigated["loaderId"]
            # This navigation's load event, by its loader: the blank page
            # the target opened with has a load event of its own, and
            # only this page's may end the load.
            events = self._wait_event(session, deadline, lambda e: e.get("method") == "Page.lifecycleEvent" and (
                e["params"].get("name"), e["params"].get("loaderId")) == ("load", loader))
            return Load(start, time.time(), *received(events))
        finally:
            self.call("Target.disposeBrowserContext", {"browserContextId": ctx})
            while not self._events.empty():  # this load's leftovers
                self._events.get_nowait()

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=10)
        except BrowserError:
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        os.close(self._to_browser)
        self._stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
