"""The page tracker (braid_status.pages) on synthetic connection snapshots,
its exposition and ``braid status``'s reading of it from an exporter; no lab."""

from __future__ import annotations

import io
import json
import re
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from braid_status import cli
from braid_status.connections import Connection, Subflow
from braid_status.exporter import Exporter, read_pages
from braid_status.exposition import exposition
from braid_status.kernel import KernelInfo
from braid_status.page import History
from braid_status.pages import DEFAULT_IDLE_MS, PageTracker, page_rules
from braid_status.report import page_lines
from braid_status.snapshot import Snapshot

PEER = "10.99.0.1"
WANS = {"e1": "10.1.1.2", "e2": "10.1.2.2"}


def conn(token: str, sent: dict[str, int], received: dict[str, int] | None = None, peer: str = PEER,
         port: int = 40000) -> Connection:
    """A connection with one subflow per WAN named in ``sent``, with those byte counts."""
    received = received or {}
    subs = tuple(Subflow(f"{WANS[w]}:{port}", f"{peer}:443", "ESTAB", token, "", n, n, received.get(w, 0), 1.0,
                         interface=w) for w, n in sent.items())
    return Connection(f"{WANS['e1']}:{port}", f"{peer}:443", "ESTAB", token, subs)


def feed(tracker: PageTracker, steps: list[tuple[float, list[Connection]]]) -> None:
    for t, conns in steps:
        tracker.update(t, conns)


def wan_bytes(page: dict[str, object]) -> dict[str, int]:
    wans = page["wans"]
    assert isinstance(wans, dict)
    return {w: v["bytes"] for w, v in wans.items()}


def test_two_bursts_apart_are_two_pages_with_their_bytes_per_wan() -> None:
    t = PageTracker(idle_ms=500)
    feed(t, [(0.0, []),  # baseline: nothing open
             (0.1, [conn("a", {"e1": 1000, "e2": 0})]),  # opened since: all its bytes count
             (0.2, [conn("a", {"e1": 3000, "e2": 1000}, {"e1": 50})]),
             (0.3, [conn("a", {"e1": 3000, "e2": 1000}, {"e1": 50})]),  # quiet ...
             (0.8, [conn("a", {"e1": 3000, "e2": 1000}, {"e1": 50})]),  # ... 0.6 s >= 0.5 s: closed
             (0.9, [conn("a", {"e1": 3000, "e2": 4000}, {"e1": 50})]),  # a new page on the same connection
             (1.0, [conn("a", {"e1": 3000, "e2": 4000}, {"e1": 50})])])
    data = t.as_json()
    assert [p["open"] for p in data["pages"]] == [True, False]
    second, first = data["pages"]
    assert wan_bytes(first) == {"e1": 3050, "e2": 1000} and first["bytes"] == 4050
    assert first["wans"]["e1"] == {"sent": 3000, "received": 50, "bytes": 3050, "share": 3050 / 4050}
    assert (first["start"], first["end"], first["duration_s"]) == (0.0, 0.2, 0.2)
    assert wan_bytes(second) == {"e1": 0, "e2": 3000}  # e1's subflow is listed: a 0 % share, not left out
    assert second["wans"]["e2"]["share"] == 1.0 and second["peer"] == PEER
    feed(t, [(1.6, [])])  # the connection closed (no bytes lost: it had none since)
    assert [p["open"] for p in t.as_json()["pages"]] == [False, False] and t.pages_total == 2
    assert t.histogram.observed == {"e1": 2, "e2": 2}
    assert t.histogram.counts["e1"][0] == 1  # one page with e1 at 0 % (<= 0.05)


def test_a_shorter_gap_is_one_page_and_other_peers_are_apart() -> None:
    t = PageTracker(idle_ms=500)
    other = "10.99.0.2"
    feed(t, [(0.0, []),
             (0.1, [conn("a", {"e1": 100, "e2": 100})]),
             (0.5, [conn("a", {"e1": 100, "e2": 100})]),  # 0.4 s quiet < 0.5 s
             (0.6, [conn("a", {"e1": 200, "e2": 100}), conn("b", {"e2": 700}, peer=other)]),
             (2.0, [])])
    pages = t.as_json()["pages"]
    assert sorted((p["peer"], p["bytes"], p["connections"]) for p in pages) == [(PEER, 300, 1), (other, 700, 1)]


@pytest.mark.parametrize(("scope", "want"), [
    (0, {(f"{PEER} a", 300), (f"{PEER} b", 500)}),  # each connection its own page
    (1, {(PEER, 800), ("10.99.0.3", 40)}),  # per peer address
    (2, {("*", 840)}),  # the whole namespace
])
def test_scopes_group_connections(scope: int, want: set[tuple[str, int]]) -> None:
    t = PageTracker(idle_ms=200, scope=scope)
    feed(t, [(0.0, []),
             (0.1, [conn("a", {"e1": 300}), conn("b", {"e2": 500}, port=40001),
                    conn("c", {"e1": 40}, peer="10.99.0.3", port=40002)]),
             (1.0, [])])
    pages = t.as_json()["pages"]
    if scope == 0:
        pages = [p for p in pages if not p["peer"].startswith("10.99.0.3")]
    assert {(p["peer"], p["bytes"]) for p in pages} == want
    assert all(p["scope"] == scope for p in pages)


def test_a_connection_that_disappears_loses_its_last_delta_only() -> None:
    t = PageTracker(idle_ms=500)
    feed(t, [(0.0, [conn("a", {"e1": 10_000, "e2": 5_000})]),  # there at the first snapshot: the baseline
             (0.1, [conn("a", {"e1": 12_000, "e2": 5_000}), conn("b", {"e1": 100}, port=40001)]),
             # a closed after moving more bytes: those are lost; b goes on
             (0.2, [conn("b", {"e1": 100, "e2": 900}, port=40001)]),
             (1.0, [])])
    (page,) = t.as_json()["pages"]
    assert wan_bytes(page) == {"e1": 2_100, "e2": 900} and page["connections"] == 2


def test_a_reused_token_or_a_new_subflow_counts_from_zero() -> None:
    t = PageTracker(idle_ms=500)
    feed(t, [(0.0, [conn("a", {"e1": 5000})]),
             (0.1, [conn("a", {"e1": 5000, "e2": 300})]),  # a subflow joined: all its bytes are new
             (0.2, [conn("a", {"e1": 200, "e2": 300})]),  # same endpoints, smaller: a new subflow
             (1.0, [])])
    (page,) = t.as_json()["pages"]
    assert wan_bytes(page) == {"e1": 200, "e2": 300}


def test_history_is_bounded_and_a_scope_change_closes_open_pages() -> None:
    t = PageTracker(idle_ms=100, keep=3, max_open=2)
    steps: list[tuple[float, list[Connection]]] = [(0.0, [])]
    for i in range(10):
        steps += [(i + 0.1, [conn(f"t{i}", {"e1": 100 + i}, port=41000 + i)]), (i + 0.5, [])]
    feed(t, steps)
    assert [p["bytes"] for p in t.as_json()["pages"]] == [109, 108, 107] and t.pages_total == 10
    # max_open: a third peer at once is not followed (counted)
    t.update(20.0, [conn("x", {"e1": 1}, peer="10.99.0.7"), conn("y", {"e1": 1}, peer="10.99.0.8", port=1),
                    conn("z", {"e1": 1}, peer="10.99.0.9", port=2)])
    assert len(t.open) == 2 and t.untracked == 1
    t.set_rules(100, 2)
    assert not t.open and t.scope == 2 and t.pages_total == 12
    with pytest.raises(ValueError):
        t.set_rules(100, 3)
    # Many WANs: beyond max_wans they count together.
    w = PageTracker(max_wans=1)
    w.update(0, [])
    w.update(0.1, [conn("a", {"e1": 1, "e2": 2})])
    assert wan_bytes(w.as_json()["pages"][0]) == {"e1": 1, "other": 2}


def test_rules_come_from_hywfs_sysctls_or_the_defaults() -> None:
    plain = KernelInfo("6.12", True, True, "default", ("default",))
    hywf = KernelInfo("6.12", True, True, "hywf", ("default", "hywf"), {"hywf_idle_ms": 200, "hywf_scope": 2})
    assert page_rules(plain) == (DEFAULT_IDLE_MS, 1)
    assert page_rules(hywf) == (200, 2) and page_rules(hywf, 50, 0) == (50, 0)


def history_with_pages() -> History:
    kernel = KernelInfo("6.12", True, True, "hywf", ("default", "hywf"), {"hywf_idle_ms": 300})
    snaps = iter([[], [conn("a", {"e1": 6000, "e2": 2000})], [], [conn("b", {"e1": 500, "e2": 1500})], []])
    history = History(None, snapshot=lambda _: Snapshot(kernel, {}, None, next(snaps)))
    for t in (100.0, 100.5, 101.0, 101.5, 102.0):
        history.sample(now=t)
    return history


def test_exposition_has_the_share_histogram_and_passes_promtool(tmp_path: Path) -> None:
    history = history_with_pages()
    snap = Snapshot(KernelInfo("6.12", True, True, "hywf", ("hywf",)), {}, None)
    text = exposition(snap, history.page_stats())
    families = {f.name: f for f in text_string_to_metric_families(text)}
    share = families["braid_page_wan_share"]
    assert share.type == "histogram"
    values = {(s.name, s.labels.get("wan"), s.labels.get("le")): s.value for s in share.samples}
    assert values[("braid_page_wan_share_count", "e1", None)] == 2
    assert values[("braid_page_wan_share_sum", "e1", None)] == pytest.approx(0.75 + 0.25)
    assert values[("braid_page_wan_share_bucket", "e1", "0.3")] == 1  # 25 %
    assert values[("braid_page_wan_share_bucket", "e1", "0.7")] == 1 and \
        values[("braid_page_wan_share_bucket", "e1", "0.8")] == 2  # 75 %
    assert values[("braid_page_wan_share_bucket", "e2", "+Inf")] == 2
    assert families["braid_page_loads"].samples[0].value == 2
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True,
                          check=False)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    # every sample line belongs to a family with HELP and TYPE (a histogram's by its suffixes)
    typed = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    for name in re.findall(r"^([a-z_]+)[{ ]", text, re.M):
        base = re.sub(r"_(bucket|sum|count)$", "", name) if name not in typed else name
        assert base in typed, name


def test_braid_status_reads_pages_from_the_exporter(tmp_path: Path) -> None:
    history = history_with_pages()
    exp = Exporter("127.0.0.1", 0, None, history, password="pw")
    stop = exp.start()
    url = f"http://127.0.0.1:{exp.port}"
    try:
        data, error = read_pages(url, "pw")
        assert data is not None and not error
        data_seen = data
        assert [(p["bytes"], p["open"]) for p in data["pages"]] == [(2000, False), (8000, False)]
        assert data["idle_ms"] == 300 and data["scope_name"] == "peer" and data["interval_s"] == 1.0
        assert read_pages(url)[1].endswith("asks for a password (--exporter-password-file FILE)")
        (tmp_path / "pw").write_text("pw\n")
        out = io.StringIO()
        assert cli.main(["status", "--no-gateways", "--json", "--exporter", url,
                         "--exporter-password-file", str(tmp_path / "pw")], out, io.StringIO()) == 0
        report = json.loads(out.getvalue())
        assert [p["bytes"] for p in report["pages"]["pages"]] == [2000, 8000] and report["pages_error"] == ""
    finally:
        stop()
    lines = page_lines("hywf", data, "")
    print("\n".join(lines))
    assert "e1" in lines[1] and "e2" in lines[1] and "75%" in lines[3] and "25%" in lines[2]
    # No exporter: one line saying how to get the history, not a failure.
    data, error = read_pages(f"http://127.0.0.1:{exp.port}")
    assert data is None and error.startswith("no braid exporter at")
    (line,) = page_lines("hywf", None, error)
    assert "braid exporter" in line
    assert page_lines("default", None, error) == []
    assert page_lines("default", {"pages": [], "idle_ms": 500}, "") == []  # nothing to show, not hywf
    assert "not hywf" in page_lines("default", dict(data_seen, scheduler="default"), "")[0]
