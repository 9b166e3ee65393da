"""``braid status`` and ``braid exporter`` without a lab: the exposition
(checked by the Prometheus project's own parser), ss parsing, the proxy's
metrics, errors and the default status file."""

from __future__ import annotations

import base64
import dataclasses
import doctest
import hashlib
import io
import json
import re
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest
from prometheus_client.parser import text_string_to_metric_families

from braid_status import cli, exporter, gateways, kernel, report
from braid_status.connections import parse_ss, traffic_by
from braid_status.exporter import Exporter, ListenError, parse_listen
from braid_status.exposition import exposition
from braid_status.gateways import DEFAULT_STATUS_FILE, Gateway, GatewayStatus, StatusFileError, load
from braid_status.kernel import BRAID_SCHEDULERS, KernelInfo, parse_netstat, scheduler_params
from braid_status.page import History
from braid_status.proxy import ProxyState, parse_metrics
from braid_status.snapshot import Snapshot
from gwsteer.config import read_defaults

# What `ss -HtinM` prints for one connection with two subflows (trimmed
# tcp_info; the token spellings differ in padding, as ss prints them).
SS = """\
tcp   ESTAB 0      0      10.1.1.2:40000 10.99.0.1:5201
\t cubic wscale:7,7 rto:204 rtt:1.5/0.7 mss:1448 bytes_sent:300000 bytes_acked:299000 bytes_received:10 \
tcp-ulp-mptcp flags:Mec token:0000(id:0)/1a2b3c(id:0) seq:1 sfseq:1 ssnoff:1 maplen:0
tcp   ESTAB 0      0      10.1.2.2:41000 10.99.0.1:5201
\t cubic rtt:3.25/1 bytes_sent:200000 bytes_acked:200000 tcp-ulp-mptcp flags:Jjecb token:9f(id:0)/001a2b3c(id:1) \
seq:1 sfseq:1 ssnoff:1 maplen:0
tcp   ESTAB 0      0      10.1.1.2:22 10.1.1.1:50000
\t cubic rtt:0.1/0.05 bytes_sent:5
mptcp ESTAB 0      0      10.1.1.2:40000 10.99.0.1:5201
\t subflows:1 remote_key token:1a2b3c write_seq:1 snd_una:1 rcv_nxt:1
mptcp LISTEN 0      4096   0.0.0.0:5201 0.0.0.0:*
"""


def snapshot() -> Snapshot:
    kernel = KernelInfo("6.12.57-braid", mptcp=True, enabled=True, scheduler="hywf",
                        available=("default", *BRAID_SCHEDULERS),
                        params={"hywf_ps_permille": 500, "bernoulli_batch": 4})
    gws = GatewayStatus("/run/braid/gateways.json", "2025-01-01T12:00:00.123Z", (
        Gateway("gw1", "10.1.1.2", True, False, True, 12.5, 11.0, 0.734, "2025-01-01T11:59:58.001Z", 1),
        Gateway('dsl "home"', "10.1.2.2", False, True, False, None, None, 0.0, "2025-01-01T11:59:59.000Z", 1)))
    return Snapshot(kernel, {"SchedBurstMoved": 3, "MPCapableSYNRX": 7}, gws, parse_ss(SS))


def test_ss_parsing_groups_subflows_by_local_token() -> None:
    conns = parse_ss(SS)
    assert len(conns) == 1, conns  # no listener, no plain TCP
    c = conns[0]
    assert (c.local, c.token) == ("10.1.1.2:40000", "001a2b3c")
    assert [(s.local_addr, s.backup, s.bytes_sent, s.rtt_ms) for s in c.subflows] == [
        ("10.1.1.2", False, 300000, 1.5), ("10.1.2.2", True, 200000, 3.25)]
    assert c.bytes_sent == 500000 and c.bytes_received == 10
    assert {a: t.bytes_sent for a, t in traffic_by(conns, "addr").items()} == {"10.1.1.2": 300000,
                                                                               "10.1.2.2": 200000}


def test_exposition_parses_with_prometheus_client_help_type_total() -> None:
    text = exposition(snapshot())
    families = {f.name: f for f in text_string_to_metric_families(text)}
    # Every sample's family has HELP and TYPE lines, and counters end in _total.
    helped = set(re.findall(r"^# HELP (\S+) ", text, re.M))
    typed = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    samples = {m for m in re.findall(r"^([a-z_]+)[{ ]", text, re.M)}
    assert samples and samples <= helped and samples <= set(typed), samples - helped
    for name, typ in typed.items():
        assert name.startswith("braid_")
        assert (typ == "counter") == name.endswith("_total"), (name, typ)
    assert all(f.documentation for f in families.values())

    def value(family: str, **labels: str) -> float:
        for s in families[family].samples:
            if all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
        raise AssertionError(f"no {family}{labels} in\n{text}")

    assert families["braid_build_info"].type == "gauge" and value("braid_build_info") == 1
    assert families["braid_mptcp_ext"].type == "counter"  # the parser drops _total from the family name
    assert value("braid_mptcp_ext", counter="SchedBurstMoved") == 3
    assert value("braid_kernel_info", braid="true", release="6.12.57-braid") == 1
    assert value("braid_mptcp_scheduler_info", scheduler="hywf") == 1
    assert value("braid_mptcp_scheduler_param", scheduler="hywf", param="ps_permille") == 500
    assert value("braid_gateway_up", gateway="gw1") == 1
    assert value("braid_gateway_up", gateway='dsl "home"') == 0  # escaped and read back
    assert value("braid_gateway_probe_rtt_seconds", gateway="gw1") == pytest.approx(0.011)
    assert 'gateway="dsl \\"home\\""' not in " ".join(
        str(s.labels) for s in families["braid_gateway_probe_rtt_seconds"].samples)  # null RTT: no sample
    assert value("braid_gateway_avmet_score", gateway="gw1") == pytest.approx(0.734)
    assert value("braid_gateway_subflow_sent_bytes", gateway="gw1") == 300000
    assert value("braid_subflow_sent_bytes", addr="10.1.2.2") == 200000
    assert value("braid_mptcp_connections") == 1
    assert value("braid_gateway_status_updated_timestamp_seconds") == pytest.approx(1735732800.123)


def test_exposition_without_status_file_or_mptcp() -> None:
    k = KernelInfo("6.1.0", mptcp=False, enabled=None, scheduler="", available=())
    text = exposition(Snapshot(k, {}, None, [], status_error="missing"))
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert families["braid_gateway_status_loaded"].samples[0].value == 0
    assert families["braid_mptcp_enabled"].samples[0].value == 0
    assert not [n for n in families if n.startswith("braid_gateway_") and n != "braid_gateway_status_loaded"]


def test_kernel_readers(tmp_path: Path) -> None:
    assert parse_netstat("TcpExt: A B\nTcpExt: 1 2\nMPTcpExt: SchedBacklogRun X\nMPTcpExt: 5 6\n") == {
        "SchedBacklogRun": 5, "X": 6}
    for name, value in (("hywf_ncons", "20"), ("delaybal_batch", "4"), ("stale_loss_cnt", "4"),
                        ("scheduler", "hywf")):
        (tmp_path / name).write_text(value + "\n")
    assert scheduler_params(tmp_path, ("default", "hywf", "delaybal")) == {"delaybal_batch": 4, "hywf_ncons": 20}


def test_proxy_metrics_parsing() -> None:
    text = ('# HELP braid_proxy_build_info x\nbraid_proxy_build_info{role="client",version="devel \\"x\\""} 1\n'
            "braid_proxy_conns_active 3\nbraid_proxy_conns_total 120\n"
            'braid_proxy_gateway_up{gateway="gw1"} 1\nother_metric 5\n')
    values, info = parse_metrics(text)
    assert info == {"role": "client", "version": 'devel "x"'}
    assert values == {"conns_active": 3, "conns_total": 120}


def test_status_file_errors_are_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["status", "--status", str(missing)], out, err) == 2
    assert err.getvalue().count("\n") == 1 and "no gwsteer status file" in err.getvalue(), err.getvalue()
    bad = tmp_path / "bad.json"
    for text, why in (("{", "not JSON"), ('{"version": 2, "gateways": []}', "version 1"),
                      ('{"version": 1, "gateways": [{"id": "gw1"}]}', "malformed")):
        bad.write_text(text)
        with pytest.raises(StatusFileError, match=why):
            load(str(bad))


def test_default_status_file_is_gwsteers() -> None:
    assert read_defaults()["status_file"].default == DEFAULT_STATUS_FILE


def test_help_and_listen() -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.parser().parse_args(["--help"])
    assert exit_.value.code == 0
    assert parse_listen("127.0.0.1:9477") == ("127.0.0.1", 9477)
    for bad in ("9477", "localhost:9477", "127.0.0.1:x"):
        with pytest.raises(ListenError):
            parse_listen(bad)
    with pytest.raises(ListenError, match="loopback"):
        parse_listen("0.0.0.0:9477")
    assert parse_listen("0.0.0.0:9477", allow_public=True) == ("0.0.0.0", 9477)


def test_exporter_serves_metrics_over_http(tmp_path: Path) -> None:
    # Loopback of this process, port picked by the kernel; no status file.
    exporter = Exporter("127.0.0.1", 0, str(tmp_path / "none.json"))
    stop = exporter.start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}/metrics", timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            text = resp.read().decode()
        for path in ("/nope", "/api/status", "/static/status.js"):  # no page without a history
            with pytest.raises(urllib.error.HTTPError):
                urllib.request.urlopen(f"http://127.0.0.1:{exporter.port}{path}", timeout=10)
    finally:
        stop()
    names = {f.name for f in text_string_to_metric_families(text)}
    assert {"braid_build_info", "braid_kernel_info", "braid_gateway_status_loaded"} <= names


@pytest.mark.parametrize("module", [gateways, kernel, report, exporter], ids=lambda m: m.__name__)
def test_doctests(module: ModuleType) -> None:
    failed, tried = doctest.testmod(module)
    assert tried and not failed


def test_page_history_rates_gaps_and_events() -> None:
    """Rates are byte differences between samples per gateway; a missing status file is a gap; up/down is an event."""
    base = snapshot()
    assert base.gateways is not None
    gw1, dsl = base.gateways.gateways
    later = dataclasses.replace(dsl, up=True, last_change="2025-01-01T12:00:01.000Z")
    snaps = iter([
        base,
        dataclasses.replace(base, gateways=dataclasses.replace(base.gateways, gateways=(gw1, later)),
                            connections=parse_ss(SS.replace("bytes_sent:300000", "bytes_sent:400000"))),
        dataclasses.replace(base, gateways=None, status_error="no file"),
    ])
    proxy = ProxyState("http://127.0.0.1:9180/metrics", reachable=False, error="refused")
    history = History("gw.json", proxy.url, snapshot=lambda _: next(snaps), proxy=lambda _: proxy)
    for t in (100.0, 101.0, 102.0):
        history.sample(now=t)
    data = history.as_json()
    assert data["history"]["t"] == [100.0, 101.0, 102.0]
    assert data["history"]["gateways"] == {
        "gw1": {"sent_bps": [None, 100_000.0, None], "received_bps": [None, 0.0, None]},
        'dsl "home"': {"sent_bps": [None, 0.0, None], "received_bps": [None, 0.0, None]}}
    assert data["status_error"] == "no file" and data["gateways"] == []
    assert data["proxy"]["reachable"] is False and data["proxy"]["error"] == "refused"
    assert [(e["gateway"], e["up"], e["kind"]) for e in data["events"]] == [
        ('dsl "home"', True, "change"), ('dsl "home"', False, "last"), ("gw1", True, "last")]
    assert data["events"][0]["time"] == gateways.rfc3339_seconds("2025-01-01T12:00:01.000Z")
    json.dumps(data)  # plain JSON types


def test_page_and_api_over_http_with_password(tmp_path: Path) -> None:
    status = tmp_path / "gateways.json"
    status.write_text(json.dumps({"version": 1, "updated": "2025-01-01T12:00:00.000Z", "gateways": [
        {"id": "gw1", "source": "10.1.1.2", "up": True, "backup": False}]}))
    history = History(str(status))
    history.sample()
    exp = Exporter("127.0.0.1", 0, str(status), history, password="s3cret")
    stop = exp.start()
    base = f"http://127.0.0.1:{exp.port}"

    def get(path: str, password: str | None) -> tuple[int, str, bytes]:
        req = urllib.request.Request(base + path)
        if password is not None:
            req.add_header("Authorization", "Basic " + base64.b64encode(f"ops:{password}".encode()).decode())
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                return resp.status, resp.headers["Content-Type"], resp.read()
        except urllib.error.HTTPError as e:
            assert e.code != 401 or e.headers["WWW-Authenticate"].startswith("Basic ")
            return e.code, e.headers["Content-Type"], e.read()
    try:
        for path in ("/", "/api/status", "/metrics", "/static/uPlot.iife.min.js"):
            assert get(path, None)[0] == 401 and get(path, "wrong")[0] == 401, path
        code, ctype, page = get("/", "s3cret")
        assert code == 200 and ctype.startswith("text/html") and b"static/uPlot.iife.min.js" in page
        for path in ("/static/status.js", "/static/status.css", "/static/uPlot.iife.min.js", "/static/uPlot.min.css"):
            assert get(path, "s3cret")[0] == 200, path
        api = json.loads(get("/api/status", "s3cret")[2])
        assert [g["id"] for g in api["gateways"]] == ["gw1"] and api["history"]["t"]
        assert get("/metrics", "s3cret")[0] == 200 and get("/static/../cli.py", "s3cret")[0] == 404
    finally:
        stop()


def test_exporter_refuses_a_public_page_without_password(tmp_path: Path) -> None:
    err = io.StringIO()
    assert cli.main(["exporter", "--listen", "0.0.0.0:0", "--status", str(tmp_path / "x")], err=err) == 2
    assert "--password-file" in err.getvalue()
    (tmp_path / "empty").write_text("\n")
    err = io.StringIO()
    assert cli.main(["exporter", "--listen", "0.0.0.0:0", "--password-file", str(tmp_path / "empty")], err=err) == 2
    assert "empty password file" in err.getvalue()
    err = io.StringIO()
    assert cli.main(["exporter", "--page-interval", "0"], err=err) == 2


def test_vendored_uplot_is_the_pinned_release() -> None:
    """page/vendor holds uPlot's release files unchanged; VENDOR names the version and their sha256."""
    vendor = Path(exporter.__file__).parent / "page" / "vendor"
    pins = dict(line.split()[::-1] for line in (vendor / "VENDOR").read_text().splitlines()
                if line and not line.startswith("#"))
    assert set(pins) == {"uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE"}
    for name, digest in pins.items():
        assert hashlib.sha256((vendor / name).read_bytes()).hexdigest() == digest, name
    assert "MIT License" in (vendor / "uPlot.LICENSE").read_text()
