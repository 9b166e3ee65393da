"""braid_testbed.sockdiag aborts exactly the TCP sockets it names, as a reset would.

On the host's loopback, in this process's namespace: two connections to
one listener and one to another; aborting by (local port, peer address)
resets the matching connections' peers and leaves the others working.
"""

from __future__ import annotations

import socket

import pytest

from braid_testbed.sockdiag import abort_tcp


def connected_pair(listener: socket.socket, source: str) -> tuple[socket.socket, socket.socket]:
    client = socket.create_connection(listener.getsockname()[:2], source_address=(source, 0), timeout=5)
    server, _ = listener.accept()
    server.settimeout(5)
    return client, server


def test_abort_resets_only_the_named_sockets() -> None:
    with socket.create_server(("127.0.0.1", 0)) as named, socket.create_server(("127.0.0.1", 0)) as other:
        port = named.getsockname()[1]
        try:
            hit = connected_pair(named, "127.0.0.2")
            spared_by_peer = connected_pair(named, "127.0.0.3")
            spared_by_port = connected_pair(other, "127.0.0.2")
        except OSError as e:
            pytest.skip(f"loopback sources 127.0.0.2/3 unusable here: {e}")
        try:
            aborted = abort_tcp(port, "127.0.0.2")
        except OSError as e:
            pytest.skip(f"this kernel cannot abort sockets (CONFIG_INET_DIAG_DESTROY): {e}")
        assert aborted == 1
        client, server = hit
        with pytest.raises(ConnectionAbortedError):
            server.send(b"x")
        with pytest.raises(ConnectionResetError):
            client.recv(1)
        for client, server in (spared_by_peer, spared_by_port):
            client.sendall(b"ping")
            assert server.recv(4) == b"ping"
        assert abort_tcp(port, "127.0.0.2") == 0
        for s in (*hit, *spared_by_peer, *spared_by_port):
            s.close()
