"""The controller's settings checks and torrc output (no tor started)."""

from __future__ import annotations

import io
import shutil
import socket
import struct
from pathlib import Path

import pytest

from braid_testbed.mini_dns import answer
from braid_tor.cli import NetworkBytes, bridge_states, extra_lines, format_bridges, main, parse_ss
from braid_tor.torrc import BridgeLine, BridgeSettings, ClientSettings, SettingsError, parse_bridges

FPR = "9030062703AA38B13A59124F7BBC3D40DD331024"
KEY = "ab" * 32
PUB = "mzUL1kU8fkEFPH87yDKwZncnkYqQY6rs4Zm2hNVKeRY"
GOOD = f"braid 10.0.0.1:4433 {FPR} pub={PUB}"
WITH_KEY = f"{GOOD} id=box1 key={KEY}"


@pytest.fixture
def pt(tmp_path: Path) -> Path:
    p = tmp_path / "braid-pt"
    p.write_text("#!/bin/sh\n")
    p.chmod(0o755)
    return p


def test_bridge_line_round_trip() -> None:
    b = BridgeLine.parse("Bridge " + WITH_KEY)
    assert (b.host, b.port, b.fingerprint, b.pub, b.key, b.client_id) == ("10.0.0.1", 4433, FPR, PUB, KEY, "box1")
    assert BridgeLine.parse(b.render()) == b
    assert BridgeLine.parse(GOOD).render() == GOOD
    p = BridgeLine.parse(GOOD + " padding=0.4 padding-idle=2s")
    assert (p.padding, p.padding_idle) == ("0.4", "2s")
    assert BridgeLine.parse(p.render()) == p
    v6 = BridgeLine.parse(f"braid [2001:db8::1]:443 {FPR.lower()} pub={PUB}")
    assert v6.render() == f"braid [2001:db8::1]:443 {FPR} pub={PUB}"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (f"obfs4 10.0.0.1:4433 {FPR} pub={PUB}", "must start with the transport name 'braid'"),
        ("braid", "no address"),
        (f"braid bridge.example:4433 {FPR} pub={PUB}", "not an IP address"),
        (f"braid 10.0.0.1 {FPR} pub={PUB}", "not address:port"),
        (f"braid 10.0.0.1:4433 pub={PUB}", "no fingerprint"),
        ("braid 10.0.0.1:4433", "no fingerprint"),
        (f"braid 10.0.0.1:4433 ABC pub={PUB}", "not 40 hex digits"),
        (f"braid 10.0.0.1:4433 {FPR}", "no pub= argument"),
        (f"braid 10.0.0.1:4433 {FPR} key={KEY}", "no pub= argument: it is from an older braid-pt"),
        (f"braid 10.0.0.1:4433 {FPR} pub=abcd", "the bridge's public key"),
        (f"{GOOD} id=box1", "go together"),
        (f"{GOOD} key={KEY}", "go together"),
        (f"{GOOD} id=box1 key=abcd", "at least 16 bytes of hex"),
        (f"{GOOD} cert=x", "unknown bridge line argument"),
        (f"{GOOD} pub={PUB}", "given twice"),
        (f"{GOOD} junk", "not key=value"),
    ],
)
def test_bridge_line_refused(line: str, message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("(", r"\(")):
        BridgeLine.parse(line)


def test_refusals_never_quote_the_key() -> None:
    for line in (f"obfs4 10.0.0.1:4433 {FPR} key={KEY}", f"braid 10.0.0.1:4433 {FPR} key:{KEY}"):
        with pytest.raises(SettingsError) as refused:
            BridgeLine.parse(line)
        assert KEY not in str(refused.value) and "key=<hidden>" in str(refused.value)


def test_client_torrc(pt: Path, tmp_path: Path) -> None:
    s = ClientSettings(data_dir=tmp_path / "d", bridges=[BridgeLine.parse(GOOD)], pt_binary=pt)
    text = s.torrc().splitlines()
    for want in ("UseBridges 1", f"ClientTransportPlugin braid exec {pt}", f"Bridge {GOOD}",
                 "SocksPort 127.0.0.1:9050", "ControlPort 127.0.0.1:9051", "CookieAuthentication 1"):
        assert want in text
    assert "TestingTorNetwork 1" not in text


def test_client_refuses_inconsistent_settings(pt: Path, tmp_path: Path) -> None:
    b = BridgeLine.parse(GOOD)
    with pytest.raises(SettingsError, match="not found or not executable"):
        ClientSettings(data_dir=tmp_path, bridges=[b], pt_binary=tmp_path / "nope").torrc()
    with pytest.raises(SettingsError, match="absolute path"):
        ClientSettings(data_dir=tmp_path, bridges=[b], pt_binary=Path("braid-pt")).torrc()
    with pytest.raises(SettingsError, match="must differ"):
        ClientSettings(data_dir=tmp_path, bridges=[b], pt_binary=pt, socks_port=9, control_port=9).torrc()
    with pytest.raises(SettingsError, match="needs the private network's --dir-authority"):
        ClientSettings(data_dir=tmp_path, bridges=[b], pt_binary=pt, testing_network=True).torrc()
    with pytest.raises(SettingsError, match="DirAuthority torrc line"):
        ClientSettings(data_dir=tmp_path, bridges=[b], pt_binary=pt, dir_authorities=["auth 1.2.3.4:80"]).torrc()


def test_bridge_torrc_and_refusals(pt: Path, tmp_path: Path) -> None:
    text = BridgeSettings(data_dir=tmp_path, pt_binary=pt).torrc().splitlines()
    for want in ("BridgeRelay 1", "ORPort 127.0.0.1:9001", "ExtORPort auto", f"ServerTransportPlugin braid exec {pt}",
                 "ServerTransportListenAddr braid 0.0.0.0:4433", "PublishServerDescriptor 0"):
        assert want in text
    for kwargs, message in (
        ({"orport": "0.0.0.0:4433", "pt_listen": "0.0.0.0:4433"}, "must differ"),
        ({"nickname": "has space"}, "letters and digits"),
        ({"publish": True}, "loopback"),
        ({"pt_listen": "anywhere"}, "not address:port"),
    ):
        with pytest.raises(SettingsError, match=message):
            BridgeSettings(data_dir=tmp_path, pt_binary=pt, **kwargs).torrc()


def test_cli_explains_and_exits_2(pt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["client", "--pt", str(pt), "--data-dir", str(tmp_path / "d"), "--bridge", f"braid 10.0.0.1:4433 {FPR}"]
    code = main(args)
    assert code == 2
    assert "braid-tor: --bridge: bridge line has no pub= argument" in capsys.readouterr().err
    assert not (tmp_path / "d").exists(), "nothing written for refused settings"


def test_mini_dns_answers() -> None:
    q = struct.pack("!HHHHHH", 7, 0x0100, 1, 0, 0, 0) + b"\x03web\x05braid\x04test\x00" + struct.pack("!HH", 1, 1)
    r = answer(q, {"web.braid.test": "10.9.0.3"})
    assert r is not None and r[:2] == q[:2] and r.endswith(socket.inet_aton("10.9.0.3"))
    nx = answer(q.replace(b"\x03web", b"\x03www"), {"web.braid.test": "10.9.0.3"})
    assert nx is not None and struct.unpack("!H", nx[2:4])[0] & 0xF == 3
    assert answer(b"short", {}) is None


def test_torrc_extra_lines() -> None:
    assert extra_lines(["ORPort 10.0.0.1:9002 NoAdvertise"]) == "ORPort 10.0.0.1:9002 NoAdvertise\n"
    for bad in ("", "   ", "Log notice stdout\nSocksPort 0"):
        with pytest.raises(SettingsError, match="one non-empty torrc line"):
            extra_lines([bad])


SS = """0      0      10.1.1.2:58278 10.0.0.1:4433
\t bbr wscale:10,10 rto:204 cwnd:11 bytes_sent:5000 bytes_acked:5001 bytes_received:3000 tcp-ulp-mptcp flags:Mmec
0      0      10.1.2.2%c-w2:40000 10.0.0.1:4433
\t cubic bytes_sent:7 bytes_received:900 tcp-ulp-mptcp flags:Jec
0      0      [2001:db8::2]:40001 [2001:db8::1]:4433
\t cubic bytes_received:1
"""


def test_parse_ss_bytes_per_subflow() -> None:
    # Real `ss -tinH state established …` layout (no state column).
    assert parse_ss(SS) == {
        ("10.1.1.2:58278", "10.0.0.1:4433"): ("10.1.1.2", 5000, 3000),
        ("10.1.2.2%c-w2:40000", "10.0.0.1:4433"): ("10.1.2.2", 7, 900),
        ("[2001:db8::2]:40001", "[2001:db8::1]:4433"): ("2001:db8::2", 0, 1),
    }
    assert parse_ss("") == {}


def test_network_bytes_keep_what_closed_subflows_carried() -> None:
    """A page's subflow closing before the next status line (the transport
    restarted) must not take its bytes out of its network's total."""
    a, b, c = ("10.1.1.2:1", "s:4433"), ("10.1.2.2:2", "s:4433"), ("10.1.2.2:3", "s:4433")
    tally = NetworkBytes()
    assert tally.update({a: ("10.1.1.2", 10, 100), b: ("10.1.2.2", 5, 50)}) == {
        "10.1.1.2": (10, 100), "10.1.2.2": (5, 50)}
    # b grows, then closes; c opens on the same network.
    assert tally.update({a: ("10.1.1.2", 20, 200), b: ("10.1.2.2", 6, 60)})["10.1.2.2"] == (6, 60)
    assert tally.update({a: ("10.1.1.2", 20, 200), c: ("10.1.2.2", 1, 1)}) == {
        "10.1.1.2": (20, 200), "10.1.2.2": (7, 61)}
    # Everything closed (a restart between samples): the totals stay.
    assert tally.update({}) == {"10.1.1.2": (20, 200), "10.1.2.2": (7, 61)}
    # The same ports again, counting from zero: a new subflow, not a loss.
    assert tally.update({a: ("10.1.1.2", 3, 4)}) == {"10.1.1.2": (23, 204), "10.1.2.2": (7, 61)}
    # ss failed: the totals stay, and the open subflow is not counted twice.
    assert tally.update(None) == {"10.1.1.2": (23, 204), "10.1.2.2": (7, 61)}
    assert tally.update({a: ("10.1.1.2", 5, 6)}) == {"10.1.1.2": (25, 206), "10.1.2.2": (7, 61)}


def test_cli_refuses_missing_tor(pt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["client", "--tor", "no-such-tor", "--pt", str(pt), "--data-dir", str(tmp_path / "d"), "--bridge", GOOD]
    assert main(args) == 2
    assert "--tor: 'no-such-tor' not found" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


def test_bridge_file_keeps_the_key_off_the_command_line(
        pt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """--bridge-file (how the Ansible role's unit passes the line) reads the
    first non-comment line; exactly one of --bridge and --bridge-file."""
    line = tmp_path / "bridge"
    line.write_text(f"# from the bridge's bridge_line\n\n{GOOD}\n")
    line.chmod(0o600)
    base = ["client", "--pt", str(pt), "--data-dir", str(tmp_path / "d")]
    if shutil.which("tor"):
        assert main([*base, "--bridge-file", str(line), "--check"]) == 0
        assert "client: settings ok" in capsys.readouterr().out
    for args, message in (
        ([], "with --bridge (repeatable) or --bridge-file"),
        (["--bridge", GOOD, "--bridge-file", str(line)], "with --bridge (repeatable) or --bridge-file"),
        (["--bridge-file", str(tmp_path / "missing")], "--bridge-file: cannot read"),
    ):
        assert main([*base, *args]) == 2
        assert message in capsys.readouterr().err
    monkeypatch.setattr("sys.stdin", io.StringIO(GOOD + "\n"))
    assert main([*base, "--bridge-file", "-", "--tor", "no-such-tor"]) == 2  # the line was read and accepted
    assert "--tor: 'no-such-tor' not found" in capsys.readouterr().err
    line.write_text(f"braid 10.0.0.1:4433 {FPR}\n")
    assert main([*base, "--bridge-file", str(line)]) == 2
    assert "bridge line has no pub= argument" in capsys.readouterr().err
    line.write_text(WITH_KEY + "\n")
    line.chmod(0o644)
    assert main([*base, "--bridge-file", str(line)]) == 2
    assert "holds a user's key and others may read it (mode 644): chmod 600" in capsys.readouterr().err
    line.write_text(GOOD + "\n")  # the public line holds no secret
    assert main([*base, "--bridge-file", str(line), "--tor", "no-such-tor"]) == 2
    assert "--tor: 'no-such-tor' not found" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("interval", ["-3", "0", "soon"])
def test_status_interval_must_be_positive(pt: Path, tmp_path: Path, interval: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["client", "--pt", str(pt), "--data-dir", str(tmp_path / "d"), "--bridge", GOOD,
              "--status-interval", interval])
    assert exited.value.code == 2
    assert "--status-interval" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("tor") is None, reason="needs tor (apt install tor)")
def test_check_runs_tors_own_parser_and_writes_nothing(
        pt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--check: tor --verify-config on the torrc the role would run; nothing written or started."""
    bridge = ["bridge", "--pt", str(pt), "--data-dir", str(tmp_path / "b"), "--pt-listen", "0.0.0.0:4433"]
    assert main([*bridge, "--check"]) == 0
    assert "bridge: settings ok, tor --verify-config accepted" in capsys.readouterr().out
    # A line only tor can judge: the controller's own checks pass it.
    assert main([*bridge, "--check", "--torrc-extra", "NoSuchOption 1"]) == 2
    assert "tor --verify-config refused the torrc: Failed to parse/validate config: Unknown option 'NoSuchOption'" \
        in capsys.readouterr().err
    assert not (tmp_path / "b").exists()


FPR2 = "B" * 40
SECOND = f"braid 10.0.0.2:4433 {FPR2} pub={PUB}"


def test_several_bridges_one_bridge_line_each(pt: Path, tmp_path: Path) -> None:
    """Every bridge gets its own Bridge line, in the order given; conflux
    stays off with several bridges too."""
    bridges = parse_bridges([("--bridge 1", GOOD), ("--bridge 2", SECOND)])
    text = ClientSettings(data_dir=tmp_path / "d", bridges=bridges, pt_binary=pt).torrc().splitlines()
    assert [line for line in text if line.startswith("Bridge ")] == [f"Bridge {GOOD}", f"Bridge {SECOND}"]
    assert "ConfluxEnabled 0" in text
    with pytest.raises(SettingsError, match="no bridge line"):
        ClientSettings(data_dir=tmp_path / "d", bridges=[], pt_binary=pt).torrc()


@pytest.mark.parametrize("lines, message", [
    ([("--bridge 1", GOOD), ("--bridge 2", GOOD)], "--bridge 2: bridge 10.0.0.1:4433 is already --bridge 1"),
    ([("--bridge 1", GOOD), ("--bridge 2", f"braid 10.0.0.1:4433 {FPR2} pub={PUB}")],
     "--bridge 2: bridge 10.0.0.1:4433 is already --bridge 1"),
    ([("--bridge 1", GOOD), ("--bridge 2", f"braid 10.0.0.3:4433 {FPR.lower()} pub={PUB}")],
     f"--bridge 2: fingerprint {FPR} is already --bridge 1's"),
    ([("--bridge 1", GOOD), ("--bridge 2", f"braid 10.0.0.2:4433 {FPR2}")], "--bridge 2: bridge line has no pub="),
    ([("F line 3", f"braid 10.0.0.2:4433 {FPR2} pub={PUB} key={KEY}")], "F line 3: bridge line arguments id="),
    ([], "no bridge line"),
])
def test_several_bridges_refused_naming_the_line(lines: list[tuple[str, str]], message: str) -> None:
    with pytest.raises(SettingsError) as e:
        parse_bridges(lines)
    assert message in str(e.value)
    assert KEY not in str(e.value)


def test_cli_takes_several_bridges(pt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--bridge repeated, or a --bridge-file with a line per bridge; a
    refusal names the argument or the file's line."""
    base = ["client", "--pt", str(pt), "--data-dir", str(tmp_path / "d"), "--tor", "no-such-tor"]
    assert main([*base, "--bridge", GOOD, "--bridge", SECOND]) == 2  # accepted up to the missing tor
    assert "--tor: 'no-such-tor' not found" in capsys.readouterr().err
    assert main([*base, "--bridge", GOOD, "--bridge", GOOD]) == 2
    assert "braid-tor: --bridge 2: bridge 10.0.0.1:4433 is already --bridge 1" in capsys.readouterr().err
    f = tmp_path / "bridges"
    f.write_text(f"# two bridges\n{GOOD}\n\n{SECOND}\n")
    f.chmod(0o600)
    assert main([*base, "--bridge-file", str(f)]) == 2
    assert "--tor: 'no-such-tor' not found" in capsys.readouterr().err
    f.write_text(f"{GOOD}\n{SECOND} id=box1\n")
    assert main([*base, "--bridge-file", str(f)]) == 2
    assert f"--bridge-file {f} line 2: bridge line arguments id= and key= go together" in capsys.readouterr().err
    assert not (tmp_path / "d").exists()
    if shutil.which("tor"):
        f.write_text(f"{GOOD}\n{SECOND}\n")
        assert main([*base[:-2], "--bridge-file", str(f), "--check"]) == 0


ENTRY_GUARDS = f"""${FPR}~bridgeA down 2026-01-01 00:00:00
${FPR2}~bridgeB up
${"C" * 40} never-connected"""
ORCONN = f"""${FPR2}~bridgeB CONNECTED
${FPR}~bridgeA LAUNCHED
10.9.0.1:4000 CONNECTED"""


def test_bridge_states_from_tors_control_port() -> None:
    """up: an open OR connection; down: tor's last attempt failed; idle:
    the last one worked, none open now; untried: never connected."""
    a, b = BridgeLine.parse(GOOD), BridgeLine.parse(SECOND)
    c = BridgeLine.parse(f"braid 10.0.0.3:4433 {'C' * 40} pub={PUB}")
    d = BridgeLine.parse(f"braid 10.0.0.4:4433 {'D' * 40} pub={PUB}")
    states = bridge_states([a, b, c, d], ENTRY_GUARDS, ORCONN, [FPR2, FPR2.lower(), "E" * 40])
    assert [(x.address, s, n) for x, s, n in states] == [
        ("10.0.0.1:4433", "down", 0), ("10.0.0.2:4433", "up", 2), ("10.0.0.3:4433", "untried", 0),
        ("10.0.0.4:4433", "untried", 0)]
    assert format_bridges(states) == (
        "bridges: 10.0.0.1:4433 down, 10.0.0.2:4433 up (2 circuits), 10.0.0.3:4433 untried, 10.0.0.4:4433 untried")
    # The guard was fine, the connection closed since: idle, not up.
    states = bridge_states([b], f"${FPR2}=bridgeB up", "", [])
    assert format_bridges(states) == "bridges: 10.0.0.2:4433 idle"
    # An open connection wins over an older failure.
    states = bridge_states([a], ENTRY_GUARDS, f"${FPR}~bridgeA CONNECTED", [FPR])
    assert format_bridges(states) == "bridges: 10.0.0.1:4433 up (1 circuit)"
