"""Website-fingerprinting attacks: k-NN (Wang et al. 2014), CUMUL
(Panchenko et al. 2016) and k-FP (Hayes & Danezis 2016), on scikit-learn.

Each attack is ``fit(traces, labels)`` then ``predict(traces)``; label -1
is an unmonitored site (open world), and an attack predicts -1 when it
judges a trace unmonitored.

How close each is to its paper:

- **CUMUL**: the paper's features exactly: packet counts and byte totals
  per direction, then the cumulative sum of signed packet sizes sampled at
  100 equidistant points of the cumulative absolute size (linear
  interpolation); features scaled to [-1, 1]; SVM with an RBF kernel, C
  and gamma by grid search over the paper's grid (C = 2^11..2^17,
  gamma = 2^-3..2^3) with cross-validation (3-fold here, 10 in the paper;
  quick mode a smaller grid), searched on at most 1000 training traces and
  the best parameters fitted on all.
- **k-FP**: a random forest (1000 trees in full mode) on Hayes's feature
  families in the order of their extractor: packet counts and fractions,
  ordering statistics, concentration of outgoing packets per 20-packet
  chunk (statistics, and the list summed into 70 bins), packets per second
  (statistics, list summed into 20 bins), inter-arrival time statistics
  and transmission-time quartiles per direction, in/out counts among the
  first and last 30 packets, the sums of the binned lists and the
  duration: 139 features (the original's 175 include the interval-
  histogram family, left out here). Closed world: the forest's vote; open world: k-NN
  (k = 3, all neighbours must agree) on the Hamming distance between leaf
  vectors, as in the paper.
- **k-NN**: Wang's features (counts and transmission time, positions of
  and gaps between the first 300 outgoing packets, outgoing counts per
  30-packet chunk for the first 100 chunks, burst statistics, the first
  20 packets' directions and sizes; missing entries skipped in the
  distance, as in Wang's code) with a weighted L1 distance. **Simplified
  weight learning**: each feature's weight is how much larger its mean
  distance between sites is than within a site (after scaling), instead
  of Wang's iterative WLLCC. Closed world k = 1; open world k = 3, all
  neighbours must agree.
- **DF** (Sirinam et al. 2018), **Tik-Tok** (Rahman et al. 2020) and
  **RF** (Shen et al. 2023): the published networks and training recipes
  in JAX (braid_wf.deep), an optional extra. On a CPU a fit of the
  published size takes hours, so they run only when asked for
  (``--attacks ...,df,tiktok,rf``); quick mode trains them on shorter
  inputs for fewer epochs.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from braid_wf.trace import Trace

Array = npt.NDArray[np.float64]
UNMONITORED = -1


class Attack(Protocol):
    name: str

    def fit(self, traces: Sequence[Trace], labels: Sequence[int]) -> None: ...

    def predict(self, traces: Sequence[Trace]) -> npt.NDArray[np.int64]: ...

    # The same on features computed beforehand (``feature_function``), so
    # that they can be computed in other processes: fit(traces, y) is
    # fit_features(feature_function(...)(traces), y).
    def fit_features(self, x: npt.NDArray[Any], labels: Sequence[int]) -> None: ...

    def predict_features(self, x: npt.NDArray[Any]) -> npt.NDArray[np.int64]: ...


class Stacked:
    """A per-trace feature function applied to many traces: picklable, so
    that worker processes can run it."""

    def __init__(self, one: Callable[[Trace], Array]) -> None:
        self.one = one

    def __call__(self, traces: Sequence[Trace]) -> Array:
        return np.stack([self.one(t) for t in traces])


# -- CUMUL ------------------------------------------------------------------

CUMUL_POINTS = 100
SEARCH_MAX = 1000


def cumul_features(tr: Trace, points: int = CUMUL_POINTS) -> Array:
    """Panchenko et al. 2016, §5: [n_in, n_out, bytes_in, bytes_out] and the
    cumulative representation sampled at ``points`` equidistant points."""
    s = tr.sizes.astype(np.float64)
    out, inc = s[s > 0], -s[s < 0]
    head = [len(inc), len(out), inc.sum(), out.sum()]
    if len(s) == 0:
        return np.asarray(head + [0.0] * points)
    c = np.concatenate([[0.0], np.cumsum(s)])
    a = np.concatenate([[0.0], np.cumsum(np.abs(s))])
    grid = np.linspace(0, a[-1], points + 1)[1:]
    return np.asarray(head + list(np.interp(grid, a, c)))


class Cumul:
    name = "CUMUL"

    def __init__(self, quick: bool = False, seed: int = 0) -> None:
        self.quick = quick
        self.seed = seed

    def fit(self, traces: Sequence[Trace], labels: Sequence[int]) -> None:
        self.fit_features(Stacked(cumul_features)(traces), labels)

    def fit_features(self, x: npt.NDArray[Any], labels: Sequence[int]) -> None:
        from sklearn.model_selection import GridSearchCV, StratifiedKFold
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import MinMaxScaler
        from sklearn.svm import SVC

        y = np.asarray(labels)
        grid = {"svc__C": [2.0**k for k in ((11, 15) if self.quick else (11, 13, 15, 17))],
                "svc__gamma": [2.0**k for k in ((-3, 1) if self.quick else (-3, -1, 1, 3))]}
        pipe = make_pipeline(MinMaxScaler(feature_range=(-1, 1)), SVC(kernel="rbf"))
        folds = min(3, int(np.bincount(y - y.min()).min()) if len(y) else 2)
        if folds >= 2:
            # The search runs on at most SEARCH_MAX traces (stratified), the
            # best parameters are then fitted on all: a full grid on the
            # thesis protocol's doubled training sets takes hours otherwise.
            sub = np.arange(len(y))
            if len(y) > SEARCH_MAX:
                from sklearn.model_selection import train_test_split

                sub, _ = train_test_split(sub, train_size=SEARCH_MAX, stratify=y, random_state=self.seed)
            search = GridSearchCV(pipe, grid, cv=StratifiedKFold(folds, shuffle=True, random_state=self.seed))
            search.fit(x[sub], y[sub])
            self.model = pipe.set_params(**search.best_params_).fit(x, y)
        else:
            pipe.set_params(svc__C=2.0**13, svc__gamma=2.0**-1)
            self.model = pipe.fit(x, y)

    def predict(self, traces: Sequence[Trace]) -> npt.NDArray[np.int64]:
        return self.predict_features(Stacked(cumul_features)(traces))

    def predict_features(self, x: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        return np.asarray(self.model.predict(x), dtype=np.int64)


# -- k-FP -------------------------------------------------------------------

def _stats(v: Array, which: str) -> list[float]:
    if len(v) == 0:
        return [0.0] * len(which)
    f: dict[str, Callable[[Array], Any]] = {"m": np.mean, "s": np.std, "d": np.median, "x": np.max, "n": np.min}
    return [float(f[c](v)) for c in which]


def _binned(v: Array, bins: int) -> list[float]:
    """A variable-length list summed into ``bins`` equal parts (k-FP's
    'alternative' lists), padded with zeros."""
    if len(v) == 0:
        return [0.0] * bins
    parts = np.array_split(v, bins) if len(v) >= bins else [v[i : i + 1] for i in range(len(v))]
    out = [float(p.sum()) for p in parts]
    return out + [0.0] * (bins - len(out))


def kfp_features(tr: Trace) -> Array:
    """Hayes & Danezis 2016's feature families (see the module docstring)."""
    t, d = tr.times, tr.directions
    n = len(d)
    out_m, in_m = d > 0, d < 0
    f: list[float] = [n, int(in_m.sum()), int(out_m.sum())]
    f += [in_m.sum() / n if n else 0.0, out_m.sum() / n if n else 0.0]
    idx = np.arange(n, dtype=np.float64)
    f += _stats(idx[out_m], "ms") + _stats(idx[in_m], "ms")
    conc = np.asarray([float((d[i : i + 20] > 0).sum()) for i in range(0, n, 20)])
    f += _stats(conc, "sdxm")
    dur = float(t[-1] - t[0]) if n else 0.0
    per_sec = np.bincount(np.floor(t - (t[0] if n else 0)).astype(np.int64)).astype(np.float64) if n \
        else np.zeros(0)
    f += _stats(per_sec, "msdnx")
    for sel in (np.ones(n, bool), in_m, out_m):
        tt = t[sel]
        iat = np.diff(tt) if len(tt) > 1 else np.zeros(0)
        f += [float(iat.max()), float(iat.mean()), float(iat.std()), float(np.percentile(iat, 75))] \
            if len(iat) else [0.0] * 4
    for sel in (np.ones(n, bool), in_m, out_m):
        tt = t[sel] - (t[0] if n else 0)
        f += [float(np.percentile(tt, q)) for q in (25, 50, 75, 100)] if len(tt) else [0.0] * 4
    f += [float((d[:30] < 0).sum()), float((d[:30] > 0).sum()),
          float((d[-30:] < 0).sum()), float((d[-30:] > 0).sum())]
    alt_conc = _binned(conc, 70)
    alt_sec = _binned(per_sec, 20)
    f += alt_conc + alt_sec + [sum(alt_conc), sum(alt_sec), dur]
    return np.asarray(f, dtype=np.float64)


class KFingerprinting:
    name = "k-FP"

    def __init__(self, trees: int = 1000, k: int = 3, open_world: bool = False, seed: int = 0,
                 n_jobs: int = 1) -> None:
        self.trees, self.k, self.open_world, self.seed, self.n_jobs = trees, k, open_world, seed, n_jobs

    def fit(self, traces: Sequence[Trace], labels: Sequence[int]) -> None:
        self.fit_features(Stacked(kfp_features)(traces), labels)

    def fit_features(self, x: npt.NDArray[Any], labels: Sequence[int]) -> None:
        from sklearn.ensemble import RandomForestClassifier

        self.y = np.asarray(labels, dtype=np.int64)
        # The forest is the same whatever n_jobs (each tree's seed comes from random_state).
        self.forest = RandomForestClassifier(n_estimators=self.trees, oob_score=False, n_jobs=self.n_jobs,
                                             random_state=self.seed).fit(x, self.y)
        if self.open_world:
            self.offsets = np.cumsum([0] + [e.tree_.node_count for e in self.forest.estimators_])
            self.train_leaves = self._leaf_matrix(x)

    def _leaf_matrix(self, x: npt.NDArray[Any]) -> Any:
        """One row per trace, one column per (tree, node): 1 where the trace lands."""
        from scipy import sparse

        leaves = self.forest.apply(x) + self.offsets[:-1]
        n, trees = leaves.shape
        return sparse.csr_matrix((np.ones(n * trees, dtype=np.int32), leaves.ravel(),
                                  np.arange(0, n * trees + 1, trees)), shape=(n, int(self.offsets[-1])))

    def predict(self, traces: Sequence[Trace]) -> npt.NDArray[np.int64]:
        return self.predict_features(Stacked(kfp_features)(traces))

    def predict_features(self, x: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        if not self.open_world:
            return np.asarray(self.forest.predict(x), dtype=np.int64)
        # Hamming similarity of leaf vectors (trees in which two traces land
        # on the same leaf) to every training trace, as a sparse product:
        # a leaf holds few training traces, so this is fast where comparing
        # leaf vectors pairwise is not. Nearest k by similarity, ties to the
        # earlier training trace; all k must agree.
        query = self._leaf_matrix(x)
        out = np.empty(len(x), dtype=np.int64)
        n_train = self.train_leaves.shape[0]
        for start in range(0, len(x), 512):
            same = (query[start:start + 512] @ self.train_leaves.T).tocsr()
            for r in range(same.shape[0]):
                cols = same.indices[same.indptr[r]:same.indptr[r + 1]]
                counts = same.data[same.indptr[r]:same.indptr[r + 1]]
                near = cols[np.lexsort((cols, -counts))[: self.k]]
                if len(near) < self.k:  # fewer similar traces than k: the first ones with similarity 0
                    rest = np.setdiff1d(np.arange(min(n_train, self.k + len(cols))), cols)
                    near = np.concatenate([near, rest[: self.k - len(near)]])
                labs = self.y[near]
                out[start + r] = labs[0] if (labs == labs[0]).all() else UNMONITORED
        return out


# -- k-NN (Wang) -----------------------------------------------------------

def _padded(v: Sequence[float], length: int) -> list[float]:
    v = list(v)[:length]
    return v + [np.nan] * (length - len(v))


def knn_features(tr: Trace) -> Array:
    """Wang et al. 2014's features (fextractor order); NaN = missing."""
    t, s, d = tr.times, tr.sizes, tr.directions
    n = len(d)
    f: list[float] = [n, float((d > 0).sum()), float((d < 0).sum()),
                      float(t[-1] - t[0]) if n else 0.0]
    out_pos = np.flatnonzero(d > 0)
    f += _padded(out_pos.tolist(), 300)
    f += _padded(np.diff(np.concatenate([[0], out_pos])).tolist(), 300)
    chunks = [float((d[i : i + 30] > 0).sum()) for i in range(0, min(n, 3000), 30)]
    f += _padded(chunks, 100)
    bursts: list[int] = []
    cur = stopped = 0
    for x in d:
        if x > 0:
            cur += 1
            stopped = 0
        else:
            stopped += 1
            if stopped == 2 and cur:  # a burst ends at two incoming packets
                bursts.append(cur)
                cur = 0
    if cur:
        bursts.append(cur)
    b = np.asarray(bursts, dtype=np.float64)
    f += [b.max() if len(b) else 0, b.mean() if len(b) else 0, len(b),
          float((b > 5).sum()), float((b > 10).sum()), float((b > 15).sum())]
    f += _padded((d[:20]).tolist(), 20) + _padded(np.abs(s[:20]).tolist(), 20)
    return np.asarray(f, dtype=np.float64)


class WangKnn:
    name = "k-NN"

    def __init__(self, k: int = 1, open_world: bool = False) -> None:
        self.k = 3 if open_world else k
        self.open_world = open_world

    def fit(self, traces: Sequence[Trace], labels: Sequence[int]) -> None:
        self.fit_features(Stacked(knn_features)(traces), labels)

    def fit_features(self, x: npt.NDArray[Any], labels: Sequence[int]) -> None:
        self.y = np.asarray(labels, dtype=np.int64)
        with warnings.catch_warnings():  # all-missing columns (short traces) are expected
            warnings.simplefilter("ignore", RuntimeWarning)
            self._learn(x)

    def _learn(self, x: Array) -> None:
        scale = np.nanstd(x, axis=0)
        scale[~np.isfinite(scale) | (scale == 0)] = 1.0
        self.x = x / scale
        self.scale = scale
        # weight = mean distance between sites / within a site (on a sample)
        rng = np.random.default_rng(0)
        m = len(self.x)
        i, j = rng.integers(m, size=4000), rng.integers(m, size=4000)
        diff = np.abs(self.x[i] - self.x[j])
        same = (self.y[i] == self.y[j]) & (i != j) & (self.y[i] >= 0)
        other = self.y[i] != self.y[j]
        within = np.nanmean(diff[same], axis=0) if same.any() else np.ones(x.shape[1])
        between = np.nanmean(diff[other], axis=0) if other.any() else np.ones(x.shape[1])
        w = np.nan_to_num(between / (within + 1e-3) - 1.0, nan=0.0)
        self.w = np.clip(w, 0.0, None)
        if not self.w.any():
            self.w = np.ones_like(self.w)

    def predict(self, traces: Sequence[Trace]) -> npt.NDArray[np.int64]:
        return self.predict_features(Stacked(knn_features)(traces))

    def predict_features(self, x: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        q = x / self.scale
        out = np.empty(len(q), dtype=np.int64)
        for i, row in enumerate(q):
            dist = np.nansum(np.abs(self.x - row) * self.w, axis=1)
            near = self.y[np.argsort(dist, kind="stable")[: self.k]]
            if self.open_world:
                out[i] = near[0] if (near == near[0]).all() else UNMONITORED
            else:
                out[i] = np.bincount(near - near.min()).argmax() + near.min()
        return out


def make_attack(name: str, quick: bool, open_world: bool, seed: int = 0,
                progress: Callable[[str], None] | None = None, *, epochs: int | None = None,
                tam_seconds: float | None = None, n_jobs: int = 1, curve_every: int = 0,
                checkpoints: Path | None = None) -> Attack:
    """``progress`` gets the deep attacks' line per epoch (they train for
    minutes to hours); ``epochs`` replaces a deep attack's number of epochs,
    ``tam_seconds`` the time RF's full TAM spans (the paper's 80 s);
    ``n_jobs``: k-FP's forest trains on that many threads; ``curve_every``:
    a deep attack's learning-curve interval, ``checkpoints``: the directory
    it saves its training in after every epoch, to go on from there
    (braid_wf.deep.train)."""
    if name == "kfp":
        return KFingerprinting(trees=200 if quick else 1000, open_world=open_world, seed=seed, n_jobs=n_jobs)
    if name == "cumul":
        return Cumul(quick=quick, seed=seed)
    if name == "knn":
        return WangKnn(open_world=open_world)
    if name in DEEP_ATTACKS:
        from braid_wf.deep.train import DeepAttack

        if quick:
            return DeepAttack(name, size=QUICK_SIZES[name], epochs=epochs or QUICK_EPOCHS, batch=QUICK_BATCH,
                              seed=seed, progress=progress, tam_seconds=tam_seconds, curve_every=curve_every,
                              checkpoints=checkpoints)
        return DeepAttack(name, seed=seed, progress=progress, epochs=epochs, tam_seconds=tam_seconds,
                          curve_every=curve_every, checkpoints=checkpoints)
    raise ValueError(f"unknown attack {name!r} ({', '.join(ALL_ATTACKS)})")


def feature_function(name: str, quick: bool, tam_seconds: float | None = None
                     ) -> Callable[[Sequence[Trace]], npt.NDArray[Any]]:
    """What ``make_attack(name, quick, ...)`` computes from traces before it
    fits or predicts; picklable and numpy-only (no JAX), for worker
    processes."""
    if name in ("kfp", "cumul", "knn"):
        return Stacked({"kfp": kfp_features, "cumul": cumul_features, "knn": knn_features}[name])
    if name in DEEP_ATTACKS:
        from braid_wf.deep.train import encoder

        return encoder(name, QUICK_SIZES[name] if quick else None, tam_seconds)
    raise ValueError(f"unknown attack {name!r} ({', '.join(ALL_ATTACKS)})")


ATTACK_NAMES = {"kfp": "k-FP", "knn": "k-NN", "cumul": "CUMUL", "df": "DF", "tiktok": "Tik-Tok", "rf": "RF"}
ATTACKS = ("kfp", "knn", "cumul")  # the default set
DEEP_ATTACKS = ("df", "tiktok", "rf")
ALL_ATTACKS = (*ATTACKS, *DEEP_ATTACKS)
# Quick mode for the deep attacks: the published networks on 1000-packet
# inputs (DF, Tik-Tok) or 360 TAM slots (16 s of a load, RF), 10 epochs of
# batches of 32 (small datasets need more, smaller steps).
QUICK_LENGTH, QUICK_SLOTS, QUICK_EPOCHS, QUICK_BATCH = 1000, 360, 10, 32
QUICK_SIZES = {"df": QUICK_LENGTH, "tiktok": QUICK_LENGTH, "rf": QUICK_SLOTS}
