"""HyWF's model of a page's wan1 share (page_split.model_shares), computed
per packet slot for all draws at once, against the model written as a loop
over bursts and pieces, one draw at a time, as hywf_take_burst() takes them
and hywf_give_back() takes back what an object leaves of its piece.
Both are seeded: each comparison's outcome is fixed."""

from __future__ import annotations

import dataclasses
import math
import random

import pytest
from scipy import stats

from braid_eval.analysis.dss import WIRE_MSS
from braid_eval.measure.page_split import PageTrace, model_shares

DRAWS = 5000
# Each comparison is KS between two seeded samples of the same model when
# both are right: below this with probability 1e-4 (seven comparisons, 7e-4
# that a right model fails for some choice of seeds); a model that puts
# pieces or bursts differently moves the distribution far further.
SAME_MODEL_ALPHA = 1e-4
# hywf_policy.h's HYWF_PIECE_DIV: a page's burst is taken in pieces of ncons / 4
PIECE_DIV = 4


def loop_model(objects: list[list[int]], per_page: bool, ncons: int, draws: int,
               rng: random.Random) -> list[float]:
    """The model one burst at a time: per page one split and one run of
    bursts taken in pieces of ncons / PIECE_DIV packets, the rest of an
    object's last piece given back; per connection a split and bursts per
    object."""
    piece_max = max(1, ncons // PIECE_DIV)

    def burst_length() -> int:  # Geometric on {1, 2, ...} with mean ncons, by inversion
        return 1 if ncons <= 1 else 1 + int(math.log(1 - rng.random()) / math.log(1 - 1 / ncons))

    out = []
    for _ in range(draws):
        page_p = rng.random()
        wan1 = total = burst_left = 0
        on_wan1 = False
        for left in rng.choice(objects):
            p = page_p if per_page else rng.random()
            if not per_page:
                burst_left = 0
            while left > 0:
                if not burst_left:
                    burst_left, on_wan1 = burst_length(), rng.random() < p
                piece = min(piece_max, burst_left) if per_page else burst_left
                sent = min(piece * WIRE_MSS, left)
                burst_left -= -(-sent // WIRE_MSS)  # the rest of the piece goes back
                wan1 += sent if on_wan1 else 0
                total += sent
                left -= sent
        out.append(wan1 / total)
    return out


def traces(objects: list[list[int]]) -> list[PageTrace]:
    return [PageTrace({"objects": [[size, 0] for size in page]}, {}, [], [], 0) for page in objects]


@pytest.mark.parametrize("per_page", [True, False])
@pytest.mark.parametrize("ncons", [1, 7, 20])
def test_model_matches_the_loop_over_bursts(per_page: bool, ncons: int) -> None:
    rng = random.Random(ncons)
    # pages of 1-10 objects from empty to 400 KB, some a whole number of packets
    objects = [[rng.choice([0, WIRE_MSS * rng.randint(1, 40), rng.randint(1, 400_000)])
                for _ in range(rng.randint(1, 10))] for _ in range(25)]
    objects = [page for page in objects if sum(page)]
    fast = model_shares(traces(objects), per_page, ncons, DRAWS, seed=1)
    slow = loop_model(objects, per_page, ncons, DRAWS, random.Random(2))
    assert stats.ks_2samp(fast, slow).pvalue > SAME_MODEL_ALPHA


def test_large_ncons_is_computed_in_chunks() -> None:
    """hywf_ncons goes up to 10000: bursts longer than most pages; the
    draws are computed a chunk at a time."""
    objects = [[2000, 600_000, 30_000]] * 3
    shares = model_shares(traces(objects), True, 10_000, 2000, seed=3)
    assert len(shares) == 2000 and all(0.0 <= s <= 1.0 for s in shares)
    slow = loop_model(objects, True, 10_000, 2000, random.Random(4))
    assert stats.ks_2samp(shares, slow).pvalue > SAME_MODEL_ALPHA


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="down or up"):
        model_shares(traces([[1]]), True, 20, 1, direction="sideways")
    with pytest.raises(ValueError, match="ncons"):
        model_shares(traces([[1]]), True, 10_001, 1)


def test_the_wire_s_packets_stand_in_for_the_objects_bytes() -> None:
    """A page captured on the wire is modelled with its connections'
    packets: packets that are the objects' bytes cut into full ones give
    the same shares, and a hello packet per connection beside a one-packet
    request (braid-proxy's) lengthens the page's run of requests, so fewer
    pages cross one WAN whole."""
    requests = [[0, 300]] * 8
    loader = PageTrace({"objects": requests}, {}, [], [], 0)
    cut = dataclasses.replace(loader, wire={"up": [[300]] * 8})
    with_hello = dataclasses.replace(loader, wire={"up": [[180, 300]] * 8})
    shares = {name: model_shares([page], True, 20, 4000, seed=5, direction="up")
              for name, page in (("loader", loader), ("cut", cut), ("hello", with_hello))}
    assert shares["cut"] == shares["loader"]
    whole = {name: sum(v in (0.0, 1.0) for v in s) / len(s) for name, s in shares.items()}
    # 0.89 for 8 packets and 0.79 for 16 (fixed seed)
    assert whole["hello"] < whole["loader"] - 0.05, whole
