"""The deep WF attacks (DF, Tik-Tok, RF): their inputs, the published
networks' shapes, and that each one learns, in quick mode, on a small
synthetic corpus, and learns nothing when the labels are shuffled.

Needs the wf-deep extra (defenses/test.sh installs it first).

Learning: 8 sites x 16 training loads, 8 x 8 test loads (chance 1/8); each
attack must get at least 40 % of the test loads right. Training is seeded
and deterministic, so this is not a statistical test: it fails when an
attack stops learning.

Shuffled labels: the same training with the training labels permuted, so
the model cannot know which site is which. Its right answers are then
compared with those it would get under each of the 8! namings of the
sites (a permutation test: the test loads of a site share their errors,
so they are not independent draws). Without a leak the true naming is one
of 40,320 exchangeable ones; the test fails only if it beats every other
naming, which happens by chance with probability 1/40,320 = 2.5e-5 per
attack, 7.4e-5 for the three.

Learning curve: DF scored on the test loads during training gives the
same model, to the prediction, as DF trained without it, and its last
point is that model's accuracy.

Checkpoints: DF trained for half the epochs goes on to all of them (its
learning rate is constant), is killed in the middle and started again,
and ends with the same model, to the prediction, and the same curve, as
DF trained for all of them without a stop; a finished checkpoint is
scored without training, and one of more epochs than asked for is
refused; another training (other labels) does not take it, and a file
that claims its name is refused. `wf defenses` run again scores the saved
training to the same results.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from braid_wf import cli
from braid_wf.attacks import QUICK_EPOCHS, QUICK_SIZES, make_attack
from braid_wf.deep import inputs
from braid_wf.deep.checkpoint import CheckpointMismatch
from braid_wf.deep.models import DFNet, RFNet
from braid_wf.deep.train import DeepAttack, encoder
from braid_wf.synth import synthetic_dataset
from braid_wf.trace import Trace

SITES, TRAIN, TEST = 8, 16, 8
LEARNT = 0.40


def naming_p_value(pred: np.ndarray, truth: np.ndarray) -> float:
    """Share of the namings of the sites under which the predictions are
    right at least as often as under the true one (itself included)."""
    confusion = np.zeros((SITES, SITES), dtype=np.int64)
    np.add.at(confusion, (pred, truth), 1)
    perms = np.asarray(list(itertools.permutations(range(SITES))))
    right = confusion[perms, np.arange(SITES)].sum(axis=1)
    return float((right >= np.trace(confusion)).mean())


def test_direction_and_timing_inputs_pad_and_cut() -> None:
    t = Trace(np.asarray([0.0, 0.5, 1.25]), np.asarray([600, -1448, -1448]))
    d = inputs.direction([t], 4)
    assert d.shape == (1, 4, 1) and d[0, :, 0].tolist() == [1, -1, -1, 0]
    assert inputs.direction([t], 2)[0, :, 0].tolist() == [1, -1]
    assert inputs.directional_timing([t], 4)[0, :, 0].tolist() == [0.0, -0.5, -1.25, 0.0]


def test_tam_counts_packets_per_slot_and_direction() -> None:
    # 10 slots over 9 s: slot = int(t * 9 / 9) = int(t); late packets in the last slot.
    t = Trace(np.asarray([0.1, 0.2, 1.5, 3.0, 3.1, 20.0]), np.asarray([100, -1448, -1448, 100, 100, -1448]))
    m = inputs.tam([t], slots=10, max_time=9.0)[0, :, :, 0]
    assert m[0].tolist() == [1, 0, 0, 2, 0, 0, 0, 0, 0, 0]
    assert m[1].tolist() == [1, 1, 0, 0, 0, 0, 0, 0, 0, 1]


@pytest.mark.parametrize("net, shape", [(DFNet(inputs.DF_LENGTH, 100), (2, inputs.DF_LENGTH, 1)),
                                        (RFNet(inputs.TAM_SLOTS, 100), (2, 2, inputs.TAM_SLOTS, 1))])
def test_published_networks_map_their_inputs_to_one_score_per_class(net: DFNet | RFNet,
                                                                     shape: tuple[int, ...]) -> None:
    params, state = jax.eval_shape(net.init, jax.random.key(0))
    logits, _ = jax.eval_shape(lambda p, s: net.apply(p, s, jnp.zeros(shape), True, jax.random.key(0)),
                               params, state)
    assert logits.shape == (2, 100)
    if isinstance(net, DFNet):
        # 5000 -> 1250 -> 313 -> 79 -> 20 after four 'same' pools of stride 4, 256 filters
        assert params["fc0"]["w"].shape == (20 * 256, 512)


@pytest.fixture(scope="module")
def corpus() -> tuple[list[Trace], list[int], list[Trace], np.ndarray]:
    ds = synthetic_dataset(SITES, TRAIN + TEST, seed=9)
    inst = [int(n.split("-")[1]) for n in ds.names]
    train = [i for i, k in enumerate(inst) if k < TRAIN]
    test = [i for i, k in enumerate(inst) if k >= TRAIN]
    return ([ds.traces[i] for i in train], [ds.labels[i] for i in train],
            [ds.traces[i] for i in test], np.asarray([ds.labels[i] for i in test]))


@pytest.mark.parametrize("attack", ["df", "tiktok", "rf"])
def test_attack_learns_and_learns_nothing_from_shuffled_labels(
        attack: str, corpus: tuple[list[Trace], list[int], list[Trace], np.ndarray]) -> None:
    train, labels, test, truth = corpus
    model = make_attack(attack, quick=True, open_world=False, seed=1)
    model.fit(train, labels)
    right = int((model.predict(test) == truth).sum())
    shuffled = list(np.random.default_rng(3).permutation(labels))
    blind = make_attack(attack, quick=True, open_world=False, seed=1)
    blind.fit(train, shuffled)
    blind_pred = blind.predict(test)
    blind_right = int((blind_pred == truth).sum())
    p = naming_p_value(blind_pred, truth)
    print(f"\n{attack}: {right}/{len(truth)} right; with shuffled labels {blind_right}/{len(truth)} "
          f"(permutation p = {p:.3f})")
    assert right >= LEARNT * len(truth)
    assert p > 1 / 40_320


@pytest.fixture(scope="module")
def watched(corpus: tuple[list[Trace], list[int], list[Trace], np.ndarray]) -> DeepAttack:
    """DF trained on the corpus with its learning curve every 4 epochs."""
    train, labels, test, truth = corpus
    model = make_attack("df", quick=True, open_world=False, seed=1, curve_every=4)
    assert isinstance(model, DeepAttack)
    encode = encoder("df", QUICK_SIZES["df"])
    model.fit_features(encode(train), labels, held_out=(encode(test), list(truth)))
    return model


def test_learning_curve_scores_held_out_loads_without_changing_the_training(
        corpus: tuple[list[Trace], list[int], list[Trace], np.ndarray], watched: DeepAttack) -> None:
    train, labels, test, truth = corpus
    plain = make_attack("df", quick=True, open_world=False, seed=1)
    plain.fit(train, labels)
    pred = watched.predict(test)
    # Every 4th of the 10 quick epochs, and the last, whose point is the model's score.
    assert [epoch for epoch, _ in watched.curve] == [4, 8, QUICK_EPOCHS]
    assert watched.curve[-1][1] == float((pred == truth).mean())
    assert pred.tolist() == plain.predict(test).tolist()


class Stop(Exception):
    """What a killed run is to the training: it ends mid-way."""


def df(**settings: Any) -> DeepAttack:
    model = make_attack("df", quick=True, open_world=False, seed=1, curve_every=4, **settings)
    assert isinstance(model, DeepAttack)
    return model


def test_checkpoints_carry_a_training_on_to_the_same_model(
        tmp_path: Path, corpus: tuple[list[Trace], list[int], list[Trace], np.ndarray], watched: DeepAttack) -> None:
    """``watched`` is the same training, uninterrupted."""
    train, labels, test, truth = corpus
    encode = encoder("df", QUICK_SIZES["df"])
    x, x_test = encode(train), encode(test)
    held_out = (x_test, list(truth))
    half = df(epochs=QUICK_EPOCHS // 2, checkpoints=tmp_path)
    half.fit_features(x, labels, held_out=held_out)
    assert [e for e, _ in half.curve] == [4, QUICK_EPOCHS // 2]

    def stop_in_epoch_8(line: str) -> None:
        if "epoch 8/" in line:
            raise Stop

    stopped = df(checkpoints=tmp_path, progress=stop_in_epoch_8)  # more epochs, then killed
    with pytest.raises(Stop):
        stopped.fit_features(x, labels, held_out=held_out)
    assert stopped.resumed_from == QUICK_EPOCHS // 2 and stopped.checkpoint == half.checkpoint
    resumed = df(checkpoints=tmp_path)
    resumed.fit_features(x, labels, held_out=held_out)
    assert resumed.resumed_from == 7 and resumed.checkpoint == half.checkpoint
    assert resumed.curve == watched.curve
    assert resumed.predict_features(x_test).tolist() == watched.predict_features(x_test).tolist()

    again = df(checkpoints=tmp_path)
    again.fit_features(x, labels, held_out=held_out)
    assert again.resumed_from == QUICK_EPOCHS
    assert again.predict_features(x_test).tolist() == watched.predict_features(x_test).tolist()
    with pytest.raises(CheckpointMismatch, match=f"holds {QUICK_EPOCHS} epochs"):
        df(epochs=QUICK_EPOCHS // 2, checkpoints=tmp_path).fit_features(x, labels, held_out=held_out)

    other = df(epochs=1, checkpoints=tmp_path)
    shuffled = list(np.random.default_rng(3).permutation(labels))
    other.fit_features(x, shuffled, held_out=held_out)
    assert other.resumed_from == 0 and other.checkpoint not in (None, half.checkpoint)
    assert half.checkpoint is not None and other.checkpoint is not None
    half.checkpoint.replace(other.checkpoint)
    with pytest.raises(CheckpointMismatch, match=str(other.checkpoint)):
        other.fit_features(x, shuffled, held_out=held_out)


def test_wf_defenses_run_again_scores_its_saved_training(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["defenses", "--sites", "4", "--instances", "6", "--unmonitored", "0", "--repeats", "1",
            "--copies", "1", "--defenses", "none", "--attacks", "df", "--checkpoints", str(tmp_path / "ck")]
    assert cli.main([*args, "--json", str(tmp_path / "first.json")]) == 0
    assert len(list((tmp_path / "ck").glob("df-*.npz"))) == 1
    assert "epoch 1/" in capsys.readouterr().err
    assert cli.main([*args, "--json", str(tmp_path / "again.json")]) == 0
    log = capsys.readouterr().err
    assert f"{QUICK_EPOCHS} of {QUICK_EPOCHS} epochs done" in log and "epoch 1/" not in log
    first, again = (json.loads((tmp_path / f"{n}.json").read_text())["results"]["none"]["closed"]["df"]
                    for n in ("first", "again"))
    for cell in (first, again):
        cell.pop("seconds")
    assert again.pop("resumed_from_epoch") == [QUICK_EPOCHS] and "resumed_from_epoch" not in first
    assert first == again
