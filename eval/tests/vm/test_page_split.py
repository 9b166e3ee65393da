"""hywf splits a page load, not a connection: pages of parallel connections
through braid-proxy, both ends running hywf, measured on each WAN's capture.

A page is PAGE_OBJECTS objects fetched over as many parallel connections
(one MPTCP connection each between braid-proxy's client and server). With
hywf_scope = 1 (per peer, the default) every connection of a page shares one
split, so the share of the page each WAN's observer sees follows p ~ U[0, 1]
from page to page. With hywf_scope = 0 (per connection) each connection
draws its own split and the page's share averages them, close to one half.

Measured shares are compared with HyWF's model of them
(braid_eval.page_split.model_shares: the split, then geometric bursts of
whole packets), since a page of a few hundred packets carries a dozen
bursts and its share is its p plus burst noise. The test runs both scopes
and checks that each fits its own model and not the other's.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import pytest
from scipy import stats

from braid_eval.page_split import PageServer, PageTrace, model_shares, traced_pages
from braid_eval.proxy_pair import BraidProxyPair
from braid_eval.transfer import read_mib
from braid_testbed import LinkSpec, StandardTestbed

WAN = LinkSpec(rate_mbit=20, delay_ms=10, queue_pkts=100)
PAGES = 40
PAGE_OBJECTS = 8
# Between pages: longer than hywf_idle_ms (500), so each page is a new epoch.
GAP_MS = 800
ALPHA = 0.05
NCONS = 20  # hywf_ncons, the default
MODEL_DRAWS = 4000
SCOPE_CONNECTION, SCOPE_PEER = 0, 1


def load_pages(tag: str, workdir: Path, scope: int, extra: list[str], count: int = PAGES,
               join_wait_ms: int | None = None) -> tuple[list[PageTrace], dict[str, int]]:
    """Pages through braid-proxy with hywf at ``scope`` on both ends; also
    the proxy's join-wait counters."""
    tb = StandardTestbed(tag, wan1=WAN, wan2=WAN)
    tb.up()
    try:
        tb.enable_kernel_pm()
        tb.set_scheduler("hywf")
        for node in ("client", "proxy"):
            tb[node].sysctl("net.mptcp.hywf_scope", scope)
            if join_wait_ms is not None:
                tb[node].sysctl("net.mptcp.hywf_join_wait_ms", join_wait_ms)
        with PageServer(tb), BraidProxyPair(tb, workdir) as pair:
            pages = traced_pages(tb, pair.socks, count,
                                 ["--objects", str(PAGE_OBJECTS), "--gap-ms", str(GAP_MS), *extra])
        nstat = tb.proxy.run(["nstat", "-az"])
        counters = {name: read_mib(nstat, f"MPTcpExt{name}")
                    for name in ("SchedJoinWait", "SchedJoinWaitTimeout", "SchedBurstMoved")}
        return pages, counters
    finally:
        tb.down()


@pytest.fixture(scope="module")
def page_scope(tmp_path_factory: pytest.TempPathFactory) -> list[PageTrace]:
    tag = f"pp{os.getpid() % 1000}"
    return load_pages(tag, tmp_path_factory.mktemp("peer"), SCOPE_PEER, [])[0]


@pytest.fixture(scope="module")
def connection_scope(tmp_path_factory: pytest.TempPathFactory) -> list[PageTrace]:
    tag = f"pc{os.getpid() % 1000}"
    return load_pages(tag, tmp_path_factory.mktemp("conn"), SCOPE_CONNECTION, [])[0]


def shares(pages: list[PageTrace], direction: str) -> list[float]:
    assert len(pages) == PAGES and all(p.result["ok"] for p in pages)
    return sorted(p.share(1, direction) for p in pages)


def describe(label: str, values: list[float]) -> None:
    ks = stats.kstest(values, "uniform")
    print(f"\n{label}: wan1 share per page: " + " ".join(f"{v:.2f}" for v in values))
    print(f"{label}: sd {statistics.pstdev(values):.3f}, KS against U[0,1] "
          f"D={ks.statistic:.3f} p={ks.pvalue:.4f}")


def model_fit(measured: list[float], pages: list[PageTrace], per_page: bool) -> float:
    """KS p-value of the measured shares against the model's prediction."""
    return float(stats.ks_2samp(measured, model_shares(pages, per_page, NCONS, MODEL_DRAWS)).pvalue)


def test_page_scope_downstream_share_is_uniform_per_page(
        page_scope: list[PageTrace], tmp_path_factory: pytest.TempPathFactory) -> None:
    """What the proxy sends back: one split per page, p ~ U[0, 1].

    KS at ALPHA against the page-scope model, confirmed on a fresh sample
    when the first rejects (a correct scheduler then fails with ALPHA^2)."""
    down = shares(page_scope, "down")
    describe("page scope, down", down)
    fit = model_fit(down, page_scope, per_page=True)
    print(f"page scope, down: KS against the page-scope model p={fit:.4f}")
    if fit <= ALPHA:
        print("first sample rejected; confirming with a fresh one")
        again = load_pages(f"pq{os.getpid() % 1000}", tmp_path_factory.mktemp("peer2"), SCOPE_PEER, [])[0]
        down = shares(again, "down")
        fit = model_fit(down, again, per_page=True)
        describe("page scope, down, second sample", down)
    assert fit > ALPHA
    assert down[0] <= 0.1 and down[-1] >= 0.9


@pytest.mark.xfail(strict=True, reason="a new connection's first flight (braid's hello and the "
                   "request) leaves on the first subflow alone: the client's subflows can only "
                   "join once the proxy has acknowledged data, and braid-proxy's spare "
                   "connections are not yet joined before use (issue 11, item 2, client side)")
def test_page_scope_upstream_share_is_uniform_per_page(page_scope: list[PageTrace]) -> None:
    up = shares(page_scope, "up")
    describe("page scope, up", up)
    assert stats.kstest(up, "uniform").pvalue > ALPHA
    assert up[0] <= 0.1 and up[-1] >= 0.9


def test_connection_scope_concentrates_each_page_near_half(
        page_scope: list[PageTrace], connection_scope: list[PageTrace]) -> None:
    """The control: a split per connection averages PAGE_OBJECTS draws per
    page. Each scope fits its own model and is rejected by the other's,
    and the per-page spread is what tells them apart."""
    per_page, per_conn = shares(page_scope, "down"), shares(connection_scope, "down")
    describe("connection scope, down", per_conn)
    conn_fit = model_fit(per_conn, connection_scope, per_page=False)
    conn_vs_page_model = model_fit(per_conn, connection_scope, per_page=True)
    page_vs_conn_model = model_fit(per_page, page_scope, per_page=False)
    print(f"connection scope vs its model p={conn_fit:.4f}, vs the page model "
          f"p={conn_vs_page_model:.4f}; page scope vs the connection model p={page_vs_conn_model:.4f}")
    assert conn_fit > ALPHA / 5
    assert conn_vs_page_model <= ALPHA
    assert page_vs_conn_model <= ALPHA
    assert statistics.pstdev(per_page) > statistics.pstdev(per_conn) + 0.08


def test_small_first_flights_follow_the_split(tag: str, tmp_path: Path) -> None:
    """Pages of small objects, each response a single first flight of at
    most 16 KB. On the wire, per relay connection (its subflows tied by
    token): does its first answer byte leave before its second subflow has
    joined? Then the whole answer crosses wan1 alone. The proxy holds an
    answer until the join (hywf_join_wait_ms): only holds that gave up
    (MPTcpExtSchedJoinWaitTimeout) may leave early. The control, with the
    hold off, shows that answers do beat the join in this setting."""
    small = ["--min-object", "2000", "--max-object", "16000"]
    held, counters = load_pages(tag, tmp_path / "held", SCOPE_PEER, small, count=24)
    alone, off = load_pages(tag, tmp_path / "alone", SCOPE_PEER, small, count=24, join_wait_ms=0)
    early = {}
    for label, pages, c in (("held", held, counters), ("hold off", alone, off)):
        assert all(p.result["ok"] for p in pages)
        flights = [f for p in pages for f in p.first_flights]
        early[label] = sum(f.before_join for f in flights)
        down = sorted(p.share(1, "down") for p in pages)
        print(f"\nsmall objects, {label}: {early[label]} of {len(flights)} connections answered "
              f"before their join; proxy counters {c}")
        print(f"small objects, {label}: wan1 share per page: {' '.join(f'{v:.2f}' for v in down)}")
        assert len(flights) >= len(pages) * PAGE_OBJECTS * 3 // 4
    assert counters["SchedJoinWait"] >= 1 and off["SchedJoinWait"] == 0
    assert early["held"] <= counters["SchedJoinWaitTimeout"] + 2
    assert early["hold off"] >= 10
    held_down = [p.share(1, "down") for p in held]
    assert min(held_down) <= 0.2 and sum(s <= 0.5 for s in held_down) >= len(held_down) // 4
