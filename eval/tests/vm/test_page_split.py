"""hywf splits a page load, not a connection: pages of parallel connections
through braid-proxy, both ends running hywf, measured on each WAN's capture.

A page is PAGE_OBJECTS objects fetched over as many parallel connections
(one MPTCP connection each between braid-proxy's client and server). With
hywf_scope = 1 (per peer, the default) every connection of a page shares one
split, so the share of the page each WAN's observer sees is uniform on
[0, 1] from page to page. With hywf_scope = 0 (per connection) each
connection draws its own split and the page's share averages them, close to
one half: the test runs both and checks that they differ as predicted.
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

import pytest
from scipy import stats

from braid_eval.page_split import PageServer, PageTrace, traced_pages
from braid_eval.proxy_pair import BraidProxyPair
from braid_eval.transfer import read_mib
from braid_testbed import LinkSpec, StandardTestbed

WAN = LinkSpec(rate_mbit=20, delay_ms=10, queue_pkts=100)
PAGES = 40
PAGE_OBJECTS = 8
# Between pages: longer than hywf_idle_ms (500), so each page is a new epoch.
GAP_MS = 800
ALPHA = 0.01
SCOPE_CONNECTION, SCOPE_PEER = 0, 1


def load_pages(tag: str, workdir: Path, scope: int, extra: list[str],
               count: int = PAGES) -> tuple[list[PageTrace], dict[str, int]]:
    """Pages through braid-proxy with hywf at ``scope`` on both ends; also
    the proxy's join-wait counters."""
    tb = StandardTestbed(tag, wan1=WAN, wan2=WAN)
    tb.up()
    try:
        tb.enable_kernel_pm()
        tb.set_scheduler("hywf")
        for node in ("client", "proxy"):
            tb[node].sysctl("net.mptcp.hywf_scope", scope)
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


def test_page_scope_downstream_share_is_uniform_per_page(page_scope: list[PageTrace]) -> None:
    """What the proxy sends back: one split per page, uniform on [0, 1]."""
    down = shares(page_scope, "down")
    describe("page scope, down", down)
    assert stats.kstest(down, "uniform").pvalue > ALPHA
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
    page, sd ~ 0.29 / sqrt(8) ~ 0.10 instead of U[0,1]'s 0.29."""
    per_page, per_conn = shares(page_scope, "down"), shares(connection_scope, "down")
    describe("connection scope, down", per_conn)
    assert statistics.pstdev(per_page) >= 0.2
    assert statistics.pstdev(per_conn) <= 0.16
    assert stats.kstest(per_conn, "uniform").pvalue <= ALPHA


def test_small_first_flights_follow_the_split(tag: str, tmp_path: Path) -> None:
    """Pages of small objects (each response a single first flight of at
    most 16 KB): the proxy holds each answer until the connection's second
    subflow has joined, so the page's bytes follow its split instead of
    crossing the first subflow's network whole."""
    pages, counters = load_pages(tag, tmp_path, SCOPE_PEER,
                                 ["--min-object", "2000", "--max-object", "16000"], count=24)
    down = sorted(p.share(1, "down") for p in pages)
    print(f"\nsmall objects, down: wan1 share per page: {' '.join(f'{v:.2f}' for v in down)}")
    print(f"proxy counters: {counters}")
    assert all(p.result["ok"] for p in pages)
    assert counters["SchedJoinWait"] >= len(pages) * PAGE_OBJECTS // 2
    # Without the hold, every small answer leaves on wan1 before the join.
    assert sum(s <= 0.5 for s in down) >= len(down) // 4
    assert down[0] <= 0.2
