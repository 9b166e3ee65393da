"""Settings for the two roles and the torrc each one gets.

Everything a user can get wrong is checked here, before tor starts, with a
message that names the setting: tor's own errors for the same mistakes
arrive late (a bridge line without pub= only fails at the first
connection, inside the transport's log).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import os
import re
from collections.abc import Sequence
from pathlib import Path

TRANSPORT = "braid"
_FPR = re.compile(r"^[0-9A-Fa-f]{40}$")
_HEXKEY = re.compile(r"^(?:[0-9A-Fa-f]{2}){16,}$")
# The bridge's X25519 public key: unpadded base64 (what the bridge prints)
# or hex.
_PUBKEY = re.compile(r"^(?:[A-Za-z0-9+/]{43}=?|[0-9A-Fa-f]{64})$")
_ARG = re.compile(r"^([A-Za-z0-9_.-]+)=(\S*)$")
_KEY_VALUE = re.compile(r"(?i)\bkey[=:]\S*")


def redacted(text: str) -> str:
    """``text`` with the bridge key's value hidden: errors quote bridge
    lines back, and a key in a log or a terminal is a key given away."""
    return _KEY_VALUE.sub("key=<hidden>", text)
_NICK = re.compile(r"^[A-Za-z0-9]{1,19}$")


class SettingsError(ValueError):
    """An inconsistent or incomplete setting; the message says which and why."""


def parse_hostport(text: str, what: str) -> tuple[str, int]:
    """An IP address and port ("10.0.0.1:4433", "[::1]:4433")."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise SettingsError(f"{what}: {text!r} is not address:port")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise SettingsError(f"{what}: {host!r} is not an IP address (tor needs one in a bridge line)")
    return host, int(port)


def _fmt_hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclasses.dataclass(frozen=True)
class BridgeLine:
    """``braid <addr:port> <fingerprint> pub=<bridge public key> [id=<user>
    key=<hex>] [padding=<budget>] [padding-idle=<duration>]``: the
    bridge's public key (no secret), a user's own credential from the
    bridge's key file if it gave one, adaptive padding of what the client
    sends (braid-pt checks the values)."""

    host: str
    port: int
    fingerprint: str
    pub: str
    client_id: str | None = None
    key: str | None = None
    padding: str | None = None
    padding_idle: str | None = None

    @classmethod
    def parse(cls, text: str) -> BridgeLine:
        words = text.split()
        if words and words[0] == "Bridge":
            words = words[1:]
        if not words or words[0] != TRANSPORT:
            raise SettingsError(
                f"bridge line must start with the transport name {TRANSPORT!r}: {redacted(text)!r}")
        if len(words) < 2:
            raise SettingsError("bridge line has no address")
        host, port = parse_hostport(words[1], "bridge line address")
        rest = words[2:]
        if not rest or "=" in rest[0]:
            raise SettingsError(
                "bridge line has no fingerprint: tor needs the bridge's identity (40 hex digits, "
                "its DataDirectory/fingerprint) to authenticate it"
            )
        fpr = rest[0]
        if not _FPR.match(fpr):
            raise SettingsError(f"bridge fingerprint {fpr!r} is not 40 hex digits")
        args: dict[str, str] = {}
        for word in rest[1:]:
            m = _ARG.match(word)
            if not m:
                raise SettingsError(f"bridge line argument {redacted(word)!r} is not key=value")
            if m.group(1) in args:
                raise SettingsError(f"bridge line argument {m.group(1)!r} given twice")
            args[m.group(1)] = m.group(2)
        unknown = set(args) - {"pub", "key", "id", "padding", "padding-idle"}
        if unknown:
            raise SettingsError(
                f"unknown bridge line argument(s) {sorted(unknown)} "
                "(braid takes pub=, id=, key=, padding= and padding-idle=)"
            )
        if "pub" not in args:
            older = " it is from an older braid-pt;" if "key" in args else ""
            raise SettingsError(
                f"bridge line has no pub= argument:{older} copy the line the bridge printed, "
                "or its braid_bridgeline.txt"
            )
        if not _PUBKEY.match(args["pub"]):
            raise SettingsError(
                "bridge line pub= must be the bridge's public key: 43 characters of base64 or 64 of hex")
        if ("id" in args) != ("key" in args):
            raise SettingsError("bridge line arguments id= and key= go together (a user's own credential)")
        if "key" in args and not _HEXKEY.match(args["key"]):
            raise SettingsError("bridge line key= must be at least 16 bytes of hex")
        return cls(host, port, fpr.upper(), args["pub"], args.get("id"), args.get("key"),
                   args.get("padding"), args.get("padding-idle"))

    @property
    def address(self) -> str:
        """``addr:port`` as tor's bridge line has it: the bridge's name in
        status lines and messages."""
        return _fmt_hostport(self.host, self.port)

    def render(self) -> str:
        line = f"{TRANSPORT} {_fmt_hostport(self.host, self.port)} {self.fingerprint} pub={self.pub}"
        if self.client_id and self.key:
            line += f" id={self.client_id} key={self.key}"
        if self.padding:
            line += f" padding={self.padding}"
        if self.padding_idle:
            line += f" padding-idle={self.padding_idle}"
        return line


def parse_bridges(lines: Sequence[tuple[str, str]]) -> list[BridgeLine]:
    """Several bridge lines, each ``(where, text)``: ``where`` names the line
    in every refusal (``--bridge 2``, ``FILE line 3``). One line per bridge:
    a second line with the same address:port or the same fingerprint is
    refused (tor keeps one guard per bridge identity, so it would never be
    a bridge of its own)."""
    if not lines:
        raise SettingsError("no bridge line")
    bridges: list[BridgeLine] = []
    by_addr: dict[str, str] = {}
    by_fpr: dict[str, str] = {}
    for where, text in lines:
        try:
            b = BridgeLine.parse(text)
        except SettingsError as e:
            raise SettingsError(f"{where}: {e}") from None
        addr = b.address
        if addr in by_addr:
            raise SettingsError(f"{where}: bridge {addr} is already {by_addr[addr]} (one line per bridge)")
        if b.fingerprint in by_fpr:
            raise SettingsError(
                f"{where}: fingerprint {b.fingerprint} is already {by_fpr[b.fingerprint]}'s: tor keeps one guard "
                "per bridge identity, so two lines with one fingerprint are not two bridges")
        by_addr[addr] = where
        by_fpr[b.fingerprint] = where
        bridges.append(b)
    return bridges


def check_executable(path: Path, what: str) -> None:
    if not path.is_absolute():
        raise SettingsError(f"{what}: {path} must be an absolute path (tor starts it from its own directory)")
    if not path.is_file() or not os.access(path, os.X_OK):
        raise SettingsError(
            f"{what}: transport binary {path} not found or not executable (build it: go build ./cmd/braid-pt)"
        )


def check_dir_authorities(lines: list[str]) -> None:
    for line in lines:
        if not line.startswith(("DirAuthority ", "AlternateDirAuthority ")):
            raise SettingsError(f"directory authority {line!r} must be a DirAuthority torrc line")


def _common(data_dir: Path, dir_authorities: list[str], testing: bool) -> list[str]:
    # stdout feeds the controller's progress display; the file keeps the log.
    lines = [f"DataDirectory {data_dir}", "Log notice stdout", f"Log notice file {data_dir / 'notice.log'}"]
    if testing:
        if not dir_authorities:
            raise SettingsError("--testing-network needs the private network's --dir-authority lines")
        lines.append("TestingTorNetwork 1")
    lines.extend(dir_authorities)
    return lines


@dataclasses.dataclass
class ClientSettings:
    """A user's tor: every connection leaves through a braid bridge. With
    several bridges tor uses one (its first reachable primary guard) and
    moves to another when that one fails."""

    data_dir: Path
    bridges: list[BridgeLine]
    pt_binary: Path
    socks_port: int = 9050
    control_port: int = 9051
    dir_authorities: list[str] = dataclasses.field(default_factory=list)
    testing_network: bool = False

    def validate(self) -> None:
        check_executable(self.pt_binary, "--pt")
        check_dir_authorities(self.dir_authorities)
        if not self.bridges:
            raise SettingsError("no bridge line")
        for name, port in (("--socks-port", self.socks_port), ("--control-port", self.control_port)):
            if not 0 < port < 65536:
                raise SettingsError(f"{name}: {port} is not a TCP port")
        if self.socks_port == self.control_port:
            raise SettingsError("--socks-port and --control-port must differ")

    def torrc(self) -> str:
        self.validate()
        lines = _common(self.data_dir, self.dir_authorities, self.testing_network)
        lines += [
            f"SocksPort 127.0.0.1:{self.socks_port}",
            f"ControlPort 127.0.0.1:{self.control_port}",
            "CookieAuthentication 1",
            "UseBridges 1",
            # Conflux builds its legs through different guards: with one
            # bridge the second leg never builds. With several it would
            # split each stream over two bridges, two braid connections on
            # the same WANs, and the kernel's scheduler (hywf) would split
            # each half on its own instead of the whole page; braid's MPTCP
            # already spreads the one bridge connection over every network,
            # and tor moves to another bridge without conflux when one
            # fails. Off with any number of bridges.
            "ConfluxEnabled 0",
            f"ClientTransportPlugin {TRANSPORT} exec {self.pt_binary}",
            *(f"Bridge {b.render()}" for b in self.bridges),
        ]
        return "\n".join(lines) + "\n"


@dataclasses.dataclass
class BridgeSettings:
    """tor as a bridge next to the braid relay: its ORPort is only reached
    through the transport."""

    data_dir: Path
    pt_binary: Path
    pt_listen: str = "0.0.0.0:4433"
    orport: str = "127.0.0.1:9001"
    nickname: str = "braidbridge"
    contact: str = ""
    control_port: int = 0
    publish: bool = False
    dir_authorities: list[str] = dataclasses.field(default_factory=list)
    testing_network: bool = False

    def validate(self) -> None:
        check_executable(self.pt_binary, "--pt")
        check_dir_authorities(self.dir_authorities)
        parse_hostport(self.pt_listen, "--pt-listen")
        host, _ = parse_hostport(self.orport, "--orport")
        if self.pt_listen == self.orport:
            raise SettingsError("--pt-listen and --orport must differ")
        if not _NICK.match(self.nickname):
            raise SettingsError(f"--nickname {self.nickname!r}: 1-19 letters and digits")
        if self.publish and ipaddress.ip_address(host).is_loopback:
            raise SettingsError("--publish with a loopback --orport: the bridge authority could not test it")

    def torrc(self) -> str:
        self.validate()
        lines = _common(self.data_dir, self.dir_authorities, self.testing_network)
        lines += [
            "SocksPort 0",
            "BridgeRelay 1",
            f"Nickname {self.nickname}",
            f"ORPort {self.orport}",
            # The transport names each client to tor here (its address and
            # the transport): tor's per-IP DoS defences and per-country
            # statistics see real clients, not the transport's loopback
            # address. tor picks a loopback port and writes the cookie
            # (DataDirectory/extended_orport_auth_cookie) for the transport.
            "ExtORPort auto",
            "ExitPolicy reject *:*",
            f"ServerTransportPlugin {TRANSPORT} exec {self.pt_binary}",
            f"ServerTransportListenAddr {TRANSPORT} {self.pt_listen}",
            # The ORPort is on loopback behind the transport: no
            # reachability test can reach it from outside.
            "AssumeReachable 1",
            f"PublishServerDescriptor {'bridge' if self.publish else '0'}",
        ]
        if self.contact:
            lines.append(f"ContactInfo {self.contact}")
        if self.control_port:
            lines += [f"ControlPort 127.0.0.1:{self.control_port}", "CookieAuthentication 1"]
        return "\n".join(lines) + "\n"
