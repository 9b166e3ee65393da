"""The demo's privacy pane: what one WAN's observer sees of page loads.

Pages of parallel connections go through braid-proxy (SOCKS on the client,
relay on the proxy) twice: once with upstream's ``default`` scheduler and
once with ``hywf`` at both ends. Each WAN is captured as its network's
operator sees it; for every page the pane reports the share of the page's
downstream bytes that wan1 carried. Under ``default`` that share is about
the same for every page (wan1 sees a steady, large part of every site);
under ``hywf`` it is one random draw per page, from almost nothing to
almost all, which is what blunts a website-fingerprinting classifier
trained on whole pages (seed thesis, section 6).

Usage (inside braid's kernel, on a testbed that is up)::

    lines, plot_path, ok = observer_pane(tb, Path("out/demo"), pages=6)
"""

from __future__ import annotations

import statistics
from pathlib import Path

from braid_eval.measure.page_split import PageServer, PageTrace, traced_pages
from braid_eval.measure.proxy_pair import BraidProxyPair
from braid_testbed import StandardTestbed

SCHEDULERS = ("default", "hywf")
PAGE_OBJECTS = 8
# Objects of 2-600 KB (about 0.8 MB a page), as the page-split test uses:
# enough of hywf's bursts per page that a page's share is its split.
PAGE_SIZES = ["--min-object", "2000", "--max-object", "600000"]
# Longer than hywf_idle_ms (500): every page starts a new split.
GAP_MS = 800


def load_pages(tb: StandardTestbed, workdir: Path, scheduler: str, pages: int) -> list[PageTrace]:
    """``pages`` page loads through a fresh braid-proxy pair, ``scheduler``
    at both ends (a relay's listening socket keeps the scheduler it was
    created with, so each scheduler gets its own pair)."""
    tb.set_scheduler(scheduler)
    with BraidProxyPair(tb, workdir / f"proxy-{scheduler}") as pair:
        # One page to warm up (cold caches, fresh processes), not reported.
        traced_pages(tb, pair.socks, 1, ["--objects", str(PAGE_OBJECTS), *PAGE_SIZES])
        return traced_pages(tb, pair.socks, pages,
                            ["--objects", str(PAGE_OBJECTS), "--gap-ms", str(GAP_MS),
                             "--seed", "7", *PAGE_SIZES])


def plot_shares(shares: dict[str, list[float]], path: Path) -> None:
    """Per page, the share of its downstream bytes wan1's observer saw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    width = 0.8 / len(shares)
    for k, (name, values) in enumerate(shares.items()):
        ax.bar([i + k * width for i in range(len(values))], values, width, label=name)
    ax.set_ylim(0, 1.2)  # room for the legend above a share of 1
    ax.set_yticks([0, 0.25, 0.5, 0.75, 1])
    ax.set_xlabel("page load")
    ax.set_ylabel("share of the page on wan1")
    ax.set_title("What wan1's observer sees of each page (downstream bytes)")
    ax.legend(loc="upper right")
    ax.grid(alpha=0.3, axis="y")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def observer_pane(tb: StandardTestbed, out: Path, pages: int) -> tuple[list[str], Path, bool]:
    """Report lines, the plot's path, and whether every page loaded whole."""
    shares: dict[str, list[float]] = {}
    ok = True
    with PageServer(tb):
        for name in SCHEDULERS:
            print(f"demo: {pages} page loads through braid-proxy under {name}...", flush=True)
            traces = load_pages(tb, out, name, pages)
            ok &= all(bool(t.result["ok"]) for t in traces)
            shares[name] = [t.share(1, "down") for t in traces]
    lines = [f"what wan1's observer sees of each page ({pages} page loads of {PAGE_OBJECTS} "
             "objects through braid-proxy, share of the page's downstream bytes on wan1):"]
    for name, values in shares.items():
        spread = f"range {min(values):.2f}-{max(values):.2f}, sd {statistics.pstdev(values):.2f}"
        lines.append(f"  {name:10} " + " ".join(f"{v:.2f}" for v in values) + f"   ({spread})")
    lines.append(f"  {'':10} default: about the same share of every page; hywf: one random "
                 "split per page load")
    path = out / "observer-share.png"
    plot_shares(shares, path)
    return lines, path, ok
