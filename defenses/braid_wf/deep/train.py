"""Training and prediction for the deep attacks, with each paper's recipe.

``DeepAttack`` has the interface of braid_wf.attacks (``fit(traces,
labels)``, ``predict(traces)``; label -1 is the open world's unmonitored
class, learnt as one more class, as DF's and RF's open-world evaluations
do).

The recipes (optimiser, learning rate, batch, epochs) are the papers':

  DF, Tik-Tok  Adamax, lr 0.002 (beta 0.9 / 0.999, eps 1e-8), batch 128,
               30 epochs
  RF           Adam, lr 5e-4 decayed by 0.2^(epoch / epochs), L2 weight
               decay 1e-3 (added to the gradient, as PyTorch's Adam does),
               batch 200, 30 epochs

One step is braid's: after the last epoch the batch-norm statistics used
for prediction are recomputed over the whole training set (the mean of
every training batch's statistics, dropout on, as in training) instead of
being the running average of the last few hundred steps. On a dataset of
the papers' size the two agree; on a small one (a quick run, a test) the
running average has not forgotten its initial value, and predictions made
with it are noise.

``size`` (input length or TAM slots), ``epochs`` and ``batch`` can be set
smaller for a quick run (the tests): the networks stay the same.

A learning curve: given held-out inputs and ``curve_every``, ``fit``
scores the model on them every that many epochs and after the last, with
the batch-norm statistics recomputed as for prediction. The training is
the same with or without it (same steps, same random keys): the curve
shows whether more epochs would have helped, it does not choose the
epoch.

With ``checkpoints`` (a directory) the training is saved there after
every epoch, under a name that the training's data and recipe determine,
and goes on from its last epoch when the same training is started again
(braid_wf.deep.checkpoint): a 30-epoch run on a CPU takes hours, longer
than a session may last. Under a constant learning rate (DF, Tik-Tok) the
number of epochs is not part of that name, so that a finished training
goes on to more epochs, to the model a longer training from the start
would have made; RF's rate decays over the epochs asked for, so its
checkpoints are per number of epochs.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from braid_wf.deep import checkpoint as ckpt
from braid_wf.deep import inputs, require_jax
from braid_wf.evaluate import score
from braid_wf.trace import Trace

PREDICT_BATCH = 256


@dataclass(frozen=True)
class Recipe:
    """How one attack reads a trace and is trained."""

    name: str
    encode: Callable[[Sequence[Trace], int], npt.NDArray[np.float32]]
    size: int  # input length (DF, Tik-Tok) or TAM slots (RF)
    optimizer: str
    lr: float
    batch: int
    epochs: int


def _tam(traces: Sequence[Trace], slots: int, span: float = inputs.TAM_MAX_TIME_S) -> npt.NDArray[np.float32]:
    """The TAM with the slot width of ``span`` seconds in 1800 slots (the
    paper's 80 s): fewer slots cover less time."""
    return inputs.tam(traces, slots, slots * span / inputs.TAM_SLOTS)


RECIPES = {
    "df": Recipe("DF", inputs.direction, inputs.DF_LENGTH, "adamax", 0.002, 128, 30),
    "tiktok": Recipe("Tik-Tok", inputs.directional_timing, inputs.DF_LENGTH, "adamax", 0.002, 128, 30),
    "rf": Recipe("RF", _tam, inputs.TAM_SLOTS, "adam-decay", 5e-4, 200, 30),
}


def encoder(attack: str, size: int | None = None, tam_seconds: float | None = None
            ) -> Callable[[Sequence[Trace]], npt.NDArray[np.float32]]:
    """The attack's input from traces (numpy only, picklable): what
    ``DeepAttack(attack, size=size, tam_seconds=tam_seconds)`` encodes."""
    recipe = RECIPES[attack]
    if attack == "rf":
        return partial(_tam, slots=size or recipe.size, span=tam_seconds or inputs.TAM_MAX_TIME_S)
    return partial(inputs.direction if attack == "df" else inputs.directional_timing, length=size or recipe.size)


def _optimizer(name: str) -> Any:
    """The recipe's optimiser up to its learning rate, which the training
    step multiplies in (by -lr, as optax.scale_by_learning_rate does): the
    rate is an argument of the compiled step, so that one compilation
    serves every training-set size and schedule."""
    import optax

    if name == "adamax":  # optax.adamax(lr, b1=0.9, b2=0.999, eps=1e-8)
        return optax.scale_by_adamax(b1=0.9, b2=0.999, eps=1e-8)
    return optax.chain(optax.add_decayed_weights(1e-3), optax.scale_by_adam())


def learning_rate(recipe: Recipe, epoch: int) -> float:
    """Adamax's constant rate; RF's decayed by 0.2^(epoch / epochs)."""
    if recipe.optimizer == "adamax":
        return recipe.lr
    return float(recipe.lr * 0.2 ** (epoch / recipe.epochs))


@dataclass(frozen=True)
class Compiled:
    """One network and optimiser with its jitted functions: built once per
    network, input size, classes and training schedule, so that another fit
    of the same shape (another repeat, the shuffled-label control, Tik-Tok
    after DF: the same network) does not compile again (seconds each on a
    CPU)."""

    net: Any
    opt: Any
    step: Any  # (params, state, opt_state, x, y, key, lr) -> (params, state, opt_state, loss, accuracy)
    stats: Any  # (params, state, x, key) -> that batch's own batch-norm statistics
    predict: Any  # (params, state, x) -> class indices


def _compiled(attack: str, recipe: Recipe, classes: int) -> Compiled:
    network = "rf" if attack == "rf" else "df"  # Tik-Tok is DF's network
    return _compile(network, recipe.size, classes, recipe.optimizer)


@lru_cache(maxsize=8)
def _compile(network: str, size: int, classes: int, optimizer: str) -> Compiled:
    import jax
    import optax

    from braid_wf.deep.models import DFNet, RFNet

    net = RFNet(size, classes) if network == "rf" else DFNet(size, classes)
    opt = _optimizer(optimizer)

    def step(params: Any, state: Any, opt_state: Any, xb: Any, yb: Any, k: Any, lr: Any) -> Any:
        def loss_fn(p: Any) -> Any:
            logits, new_state = net.apply(p, state, xb, True, k)
            loss = optax.softmax_cross_entropy_with_integer_labels(logits, yb).mean()
            return loss, (new_state, (logits.argmax(-1) == yb).mean())

        (loss, (new_state, acc)), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        updates = jax.tree_util.tree_map(lambda u: u * -lr, updates)
        return optax.apply_updates(params, updates), new_state, opt_state, loss, acc

    def stats(params: Any, state: Any, xb: Any, k: Any) -> Any:
        return net.apply(params, state, xb, True, k, stats_momentum=0.0)[1]

    def predict(params: Any, state: Any, xb: Any) -> Any:
        return net.apply(params, state, xb, False, jax.random.key(0))[0].argmax(-1)

    return Compiled(net, opt, jax.jit(step, donate_argnums=(0, 1, 2)), jax.jit(stats), jax.jit(predict))


@lru_cache(maxsize=1)
def _code_version() -> str:
    """The networks, their layers, the optimisers and the JAX that runs
    them: a checkpoint made by other code is not continued."""
    import inspect

    import jax
    import optax

    from braid_wf.deep import layers, models

    return ckpt.fingerprint(inspect.getsource(models), inspect.getsource(layers), inspect.getsource(_optimizer),
                            inspect.getsource(_compile), jax.__version__, optax.__version__)


class DeepAttack:
    """One of DF, Tik-Tok, RF; ``progress`` gets a line per epoch."""

    def __init__(self, attack: str, *, size: int | None = None, epochs: int | None = None,
                 batch: int | None = None, seed: int = 0,
                 progress: Callable[[str], None] | None = None, tam_seconds: float | None = None,
                 curve_every: int = 0, checkpoints: Path | None = None) -> None:
        if attack not in RECIPES:
            raise ValueError(f"unknown deep attack {attack!r} ({', '.join(RECIPES)})")
        require_jax()
        base = RECIPES[attack]
        self.attack = attack
        self.recipe = Recipe(base.name, base.encode, size or base.size, base.optimizer, base.lr,
                             batch or base.batch, epochs or base.epochs)
        self.name = base.name
        self.seed = seed
        self.progress = progress
        self.curve_every = curve_every
        self.curve: list[tuple[int, float]] = []  # (epoch, held-out accuracy)
        self.checkpoints = checkpoints
        self.checkpoint: Path | None = None  # the last fit's checkpoint file
        self.resumed_from = 0  # epochs the last fit found done in it
        self._encode = encoder(attack, self.recipe.size, tam_seconds)

    def fit(self, traces: Sequence[Trace], labels: Sequence[int]) -> None:
        self.fit_features(self._encode(traces), labels)

    def fit_features(self, x: npt.NDArray[Any], labels: Sequence[int],
                     held_out: tuple[npt.NDArray[Any], Sequence[int]] | None = None) -> None:
        """Train on inputs ``encoder`` made; with ``held_out`` (inputs and
        labels) and ``curve_every``, record the learning curve."""
        import jax

        self.curve = []
        self.classes = np.asarray(sorted(set(labels)), dtype=np.int64)
        y = np.searchsorted(self.classes, np.asarray(labels)).astype(np.int32)
        x = np.asarray(x, dtype=np.float32)
        batch = min(self.recipe.batch, len(x))
        steps = len(x) // batch  # the last partial batch is left for the next epoch's shuffle
        c = _compiled(self.attack, self.recipe, len(self.classes))
        # The training set goes to the device once; batches are gathered there.
        xd, yd = jax.device_put(x), jax.device_put(y)
        key = jax.random.key(self.seed)
        key, init_key = jax.random.split(key)
        params, state = c.net.init(init_key)
        opt_state = c.opt.init(params)
        rng = np.random.default_rng(self.seed)
        digest = self._fingerprint(x, y, held_out)
        first = 0
        self.checkpoint = self.checkpoints / f"{self.attack}-{digest}.npz" if self.checkpoints else None
        saved = ckpt.load(self.checkpoint, digest) if self.checkpoint else None
        if saved is not None:
            if saved.epoch > self.recipe.epochs:
                raise ckpt.CheckpointMismatch(
                    f"{self.checkpoint} holds {saved.epoch} epochs of this training, more than the "
                    f"{self.recipe.epochs} asked for: ask for at least {saved.epoch}, or give another "
                    "checkpoint directory")
            params, state, opt_state, key = self._restore(saved, params, state, opt_state)
            rng.bit_generator.state = saved.rng
            first = saved.epoch
            # a shorter training's last point is not on a longer one's curve
            self.curve = [(e, a) for e, a in saved.curve
                          if e == self.recipe.epochs or (self.curve_every and e % self.curve_every == 0)]
            if self.progress:
                self.progress(f"{self.name}: {first} of {self.recipe.epochs} epochs done in {self.checkpoint}; "
                              "going on from there")
        self.resumed_from = first
        start = time.monotonic()
        if first == self.recipe.epochs:  # finished before: only the prediction's statistics are left
            self.compiled, self.params = c, params
            self.state = self._batch_statistics(xd, batch, state, key)
        for epoch in range(first, self.recipe.epochs):
            order = rng.permutation(len(x))
            losses, accs = [], []
            lr = np.float32(learning_rate(self.recipe, epoch))
            for s in range(steps):
                idx = jax.device_put(order[s * batch:(s + 1) * batch])
                key, k = jax.random.split(key)
                params, state, opt_state, loss, acc = c.step(params, state, opt_state, xd[idx], yd[idx], k, lr)
                losses.append(loss)
                accs.append(acc)
            if self.progress:
                done = time.monotonic() - start
                eta = done / (epoch + 1 - first) * (self.recipe.epochs - epoch - 1)
                self.progress(f"{self.name}: epoch {epoch + 1}/{self.recipe.epochs}, "
                              f"loss {float(np.mean(losses)):.3f}, train accuracy {float(np.mean(accs)):.3f}, "
                              f"{done:.0f} s, ETA {eta:.0f} s")
            last = epoch + 1 == self.recipe.epochs
            scored = held_out is not None and self.curve_every > 0 and (last or (epoch + 1) % self.curve_every == 0)
            if last or scored:
                self.compiled, self.params = c, params
                self.state = self._batch_statistics(xd, batch, state, key)
            if scored and held_out is not None:
                self.curve.append((epoch + 1, score(self.predict_features(held_out[0]), list(held_out[1]))[0]))
                if self.progress:
                    self.progress(f"{self.name}: held-out accuracy after epoch {epoch + 1}: "
                                  f"{100 * self.curve[-1][1]:.1f} %")
            if self.checkpoint:
                leaves = [jax.tree_util.tree_leaves(jax.device_get(t)) for t in (params, state, opt_state)]
                try:
                    ckpt.save(self.checkpoint, digest, ckpt.Saved(
                        epoch + 1, params=leaves[0], state=leaves[1], opt_state=leaves[2],
                        key=np.asarray(jax.random.key_data(key)), rng=dict(rng.bit_generator.state),
                        curve=self.curve))
                except OSError as err:
                    if self.progress:
                        self.progress(f"{self.name}: epoch {epoch + 1} not saved ({err}); the training goes on")

    def _fingerprint(self, x: npt.NDArray[Any], y: npt.NDArray[Any],
                     held_out: tuple[npt.NDArray[Any], Sequence[int]] | None) -> str:
        """What a checkpoint must have been trained on to be continued:
        the code that trains, the recipe (its number of epochs only where
        the learning rate depends on it), the seed, the data and (for the
        curve) the held-out loads and when they are scored."""
        r = self.recipe
        extra: list[Any] = [] if held_out is None else [np.asarray(held_out[0], dtype=np.float32),
                                                        np.asarray(held_out[1], dtype=np.int64),
                                                        self.curve_every]
        schedule = r.epochs if r.optimizer != "adamax" else "constant rate"  # see learning_rate()
        return ckpt.fingerprint(_code_version(), self.attack, r.size, r.optimizer, r.lr, r.batch, schedule,
                                self.seed, self.classes, x, y, *extra)

    @staticmethod
    def _restore(saved: ckpt.Saved, params: Any, state: Any, opt_state: Any) -> tuple[Any, Any, Any, Any]:
        """The saved leaves in the structure of a fresh network's."""
        import jax

        def tree(like: Any, leaves: list[npt.NDArray[Any]]) -> Any:
            structure = jax.tree_util.tree_structure(like)
            if len(jax.tree_util.tree_leaves(like)) != len(leaves):
                raise ckpt.CheckpointMismatch("the checkpoint's network differs from this one")
            return jax.device_put(jax.tree_util.tree_unflatten(structure, leaves))

        return (tree(params, saved.params), tree(state, saved.state), tree(opt_state, saved.opt_state),
                jax.random.wrap_key_data(jax.device_put(saved.key)))

    def _batch_statistics(self, x: Any, batch: int, state: Any, key: Any) -> Any:
        """The batch-norm state for prediction: every training batch's own
        statistics, averaged (module docstring)."""
        import jax

        total = None
        batches = max(1, len(x) // batch)
        for s in range(batches):
            key, k = jax.random.split(key)
            one = self.compiled.stats(self.params, state, x[s * batch:(s + 1) * batch], k)
            total = one if total is None else jax.tree_util.tree_map(lambda a, b: a + b, total, one)
        return jax.tree_util.tree_map(lambda a: a / batches, total)

    def predict(self, traces: Sequence[Trace]) -> npt.NDArray[np.int64]:
        return self.predict_features(self._encode(traces))

    def predict_features(self, x: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        x = np.asarray(x, dtype=np.float32)
        out = []
        for s in range(0, len(x), PREDICT_BATCH):
            xb = x[s:s + PREDICT_BATCH]
            pad = PREDICT_BATCH - len(xb)  # one shape, one compilation
            if pad:
                xb = np.concatenate([xb, np.zeros((pad, *xb.shape[1:]), np.float32)])
            out.append(np.asarray(self.compiled.predict(self.params, self.state, xb))[:PREDICT_BATCH - pad])
        return np.asarray(self.classes[np.concatenate(out)], dtype=np.int64)
