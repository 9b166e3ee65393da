"""bulk.py's uploads on loopback (host kernel, MPTCP): an upload stopped
after --seconds still checks out, --hold-file keeps the connection open
until the file appears, and IPv6 addresses work."""

from __future__ import annotations

import io
import json
import socket
import threading
import time
from pathlib import Path

import pytest

from braid_testbed import bulk


def free_port(family: int = socket.AF_INET, host: str = "127.0.0.1") -> int:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def serve_one(host: str, port: int, progress: Path, extra: tuple[str, ...] = ()) -> threading.Thread:
    """A bulk.py server for one connection, in a thread; returns once it
    listens (it says so on its output after listen())."""
    out = io.StringIO()
    t = threading.Thread(target=bulk.main, args=(["serve", "--bind", host, "--port", str(port), "--count", "1",
                                                  "--progress", str(progress), *extra], out, io.StringIO()),
                         daemon=True)
    t.start()
    deadline = time.monotonic() + 30  # generous: the suite may share the cores with a VM
    while "listening on" not in out.getvalue():
        assert t.is_alive(), "bulk.py serve exited before it listened"
        assert time.monotonic() < deadline, "bulk.py serve did not listen"
        time.sleep(0.01)
    return t


def send(args: list[str]) -> tuple[int, dict[str, object], str]:
    out, err = io.StringIO(), io.StringIO()
    rc = bulk.main(["send", *args], out, err)
    lines = out.getvalue().splitlines()
    return rc, json.loads(lines[-1]) if lines else {}, err.getvalue()


def received(progress: Path) -> int:
    return int(progress.read_text().split()[-1])


def test_upload_stopped_after_seconds_checks_out(tmp_path: Path) -> None:
    port = free_port()
    server = serve_one("127.0.0.1", port, tmp_path / "progress")
    start = time.monotonic()
    # 10 MiB at 40 Mbit/s would take 2.1 s: bounded even if --seconds were ignored.
    rc, result, err = send(["--host", "127.0.0.1", "--port", str(port), "--bytes", "10M",
                            "--rates", "40", "--mode", "paced", "--seconds", "0.5"])
    server.join(10)
    assert rc == 0, err
    assert time.monotonic() - start < 1.5
    assert result["digest_ok"] is True and 0 < int(str(result["sent"])) < 10 << 20
    assert result["bytes"] == result["sent"] == received(tmp_path / "progress")


def test_hold_file_keeps_the_connection_open_until_it_exists(tmp_path: Path) -> None:
    port = free_port()
    server = serve_one("127.0.0.1", port, tmp_path / "progress")
    release = tmp_path / "release"
    done: list[tuple[int, dict[str, object], str]] = []
    sender = threading.Thread(target=lambda: done.append(send(
        ["--host", "127.0.0.1", "--port", str(port), "--bytes", "64K", "--hold-file", str(release)])))
    sender.start()
    time.sleep(0.5)
    assert not done, "the sender closed before the hold file existed"
    release.touch()
    sender.join(10)
    server.join(10)
    rc, result, err = done[0]
    assert rc == 0 and result["digest_ok"] is True and result["bytes"] == 64 << 10, err


def test_a_hold_longer_than_the_server_s_timeout_is_answered(tmp_path: Path) -> None:
    """The server answers an upload once the sender has half-closed, or,
    for a sender that holds its connection open past the server's
    --timeout, when that timeout ends: the upload still checks out."""
    port = free_port()
    server = serve_one("127.0.0.1", port, tmp_path / "progress", ("--timeout", "0.3"))
    release = tmp_path / "release"
    threading.Timer(1.0, release.touch).start()
    rc, result, err = send(["--host", "127.0.0.1", "--port", str(port), "--bytes", "64K",
                            "--hold-file", str(release)])
    server.join(10)
    assert rc == 0 and result["digest_ok"] is True, err


def test_upload_over_ipv6(tmp_path: Path) -> None:
    if not socket.has_ipv6:
        pytest.skip("no IPv6 in this Python")
    port = free_port(socket.AF_INET6, "::1")
    server = serve_one("::1", port, tmp_path / "progress")
    rc, result, err = send(["--host", "::1", "--port", str(port), "--bytes", "256K"])
    server.join(10)
    assert rc == 0 and result["digest_ok"] is True, err
    assert received(tmp_path / "progress") == 256 << 10


def test_drained_waits_for_the_peer_to_take_the_data() -> None:
    """Over MPTCP: a peer that reads nothing leaves written data
    unacknowledged (its receive window fills) and drained() gives up at its
    limit; once the peer reads it all, drained() sees it acknowledged."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM, bulk.IPPROTO_MPTCP) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        sender = socket.socket(socket.AF_INET, socket.SOCK_STREAM, bulk.IPPROTO_MPTCP)
        sender.connect(listener.getsockname())
        peer, _ = listener.accept()
        with sender, peer:
            sender.setblocking(False)
            written = 0
            try:
                while written < 256 << 20:
                    written += sender.send(b"x" * 65536)
            except BlockingIOError:
                pass
            assert bulk.unacknowledged(sender) > 0
            assert not bulk.drained(sender, limit_s=0.2)
            assert written < 256 << 20, "the peer's window never filled"
            got = 0
            while got < written:
                got += len(peer.recv(1 << 20))
            assert bulk.drained(sender, limit_s=10)
            assert bulk.unacknowledged(sender) == 0


def test_an_upload_reports_its_subflow_ids(tmp_path: Path) -> None:
    """The kernel names a new connection's one subflow 1 (MPTCP_FULL_INFO):
    the field that the reconnect test in braid's kernel reads."""
    port = free_port()
    server = serve_one("127.0.0.1", port, tmp_path / "progress")
    rc, result, err = send(["--host", "127.0.0.1", "--port", str(port), "--bytes", "64K"])
    server.join(10)
    assert rc == 0, err
    assert result["subflow_ids"] == [1]
