"""The privacy goal's overview: each defence's row gathers every attack
run against it on the web-shaped corpus (under the mean burst it ran
with), the page-load benchmark's figures for its condition, and is judged
met, not met, or not established with what is missing."""

from __future__ import annotations

from typing import Any

from braid_eval.analysis.privacy_goal import defence_label, evidence, goal_section, verdict

WEB = {"condition": "single", "profile": "web"}
PAGES = 40


def run(rows: dict[str, dict[str, float]], epochs: int | None = 30, ncons: int = 20,
        collection: dict[str, str] | None = WEB) -> dict[str, Any]:
    """A ``braid-wf defenses`` result: per defence, attack -> accuracy."""
    return {"meta": {"collection": collection, "epochs": epochs, "params": {"ncons": ncons}, "sites": 100,
                     "full": True},
            "results": {d: {"overhead": 0.3 if "ap" in d else 0.0,
                            "closed": {a: {"attack": a, "tpr_mean": acc} for a, acc in cells.items()}}
                        for d, cells in rows.items()}}


def bench(factors: dict[str, float], wire: dict[str, float] | None = None) -> dict[str, Any]:
    """The page-load benchmark with every page ``factor`` times default's."""
    base = [0.5 + 0.05 * i for i in range(PAGES)]
    factors = {**factors, "bernoulli": 1.0}  # a bare scheduler too: the benchmark compares those as well
    conditions = ["default", *factors]
    return {"params": {"conditions": conditions},
            "results": {c: {"median_s": 1.0, "wire_kb_per_page": 100.0 * (wire or {}).get(c, 1.0)}
                        for c in conditions},
            "page_times_s": {"default": base, **{c: [t * f for t in base] for c, f in factors.items()}}}


def test_a_row_is_the_defence_with_the_burst_it_ran_with() -> None:
    assert defence_label("hywf", {"params": {"ncons": 100}}) == "hywf:ncons=100"
    assert defence_label("hywf:ncons=100", {"params": {"ncons": 20}}) == "hywf:ncons=100"
    assert defence_label("hywf:ncons=20", {"params": {"ncons": 100}}) == "hywf"
    assert defence_label("ap", {"params": {"ncons": 100}}) == "ap"
    assert defence_label("hywf-ap:budget=0.2", {}) == "hywf-ap:budget=0.2"


def test_every_run_of_an_attack_counts_with_its_highest_accuracy() -> None:
    runs = [run({"hywf": {"kfp": 0.267}, "hywf:ncons=100": {"kfp": 0.231}}, epochs=None),
            run({"hywf": {"df": 0.276}}, epochs=20, ncons=100),
            run({"hywf": {"df": 0.29}}, ncons=100),
            run({"hywf": {"df": 0.9}}, collection={"condition": "single"}),  # not the web-shaped corpus
            {**run({"hywf": {"df": 0.95}}), "meta": {**run({})["meta"], "full": False}}]  # quick attacks
    rows = evidence(runs, bench({"hywf-long": 1.05, "hywf-ap-long": 1.08}))
    assert set(rows) == {"hywf", "hywf:ncons=100", "hywf-ap:ncons=100"}
    # the padded long-burst condition's page loads land on its simulator's row
    assert rows["hywf-ap:ncons=100"].page_time is not None and not rows["hywf-ap:ncons=100"].accuracy
    assert rows["hywf"].accuracy == {"kfp": (0.267, None)}
    assert rows["hywf:ncons=100"].accuracy == {"kfp": (0.231, None), "df": (0.29, 30)}
    assert rows["hywf:ncons=100"].most_epochs == {"df": 30}
    assert rows["hywf:ncons=100"].page_time is not None and rows["hywf:ncons=100"].page_time.items == PAGES
    # a shorter training that scored higher counts, but the attack has run in full
    rows = evidence([run({"hywf": {"df": 0.3}}, epochs=20), run({"hywf": {"df": 0.2}})], None)
    assert rows["hywf"].accuracy == {"df": (0.3, 20)} and "epochs" not in verdict(rows["hywf"])


def test_met_only_with_every_attack_in_full_and_the_whole_interval_inside() -> None:
    every = {"kfp": 0.2, "df": 0.25, "tiktok": 0.22, "rf": 0.3}
    page_bench = bench({"hywf": 1.05, "hywf-ap": 1.2, "ap": 1.05}, wire={"ap": 1.5})
    rows = evidence([run({"hywf": every, "hywf-ap": {**every, "rf": 0.31}, "ap": every})], page_bench)
    assert verdict(rows["hywf"]) == "met"
    assert verdict(rows["hywf-ap"]) == "**not met**"  # RF above 30 %, and the page-load time
    assert verdict(rows["ap"]) == "**not met**"  # 50 % more bytes on the wire
    rows = evidence([run({"hywf": {k: v for k, v in every.items() if k != "rf"}}, epochs=20)], None)
    assert verdict(rows["hywf"]) == ("not established: RF not run; trained for DF 20 of 30 epochs, Tik-Tok 20 of "
                                     "30 epochs; page-load time not measured; bytes on the wire not measured")
    noisy = bench({"hywf": 1.0})
    noisy["page_times_s"]["hywf"] = [t * (0.8 if i % 2 else 1.4) for i, t in enumerate(noisy["page_times_s"]["hywf"])]
    rows = evidence([run({"hywf": every})], noisy)
    assert verdict(rows["hywf"]) == f"not established: page-load time not resolved by {PAGES} pages"
    median_only = bench({"hywf": 1.0})
    del median_only["page_times_s"]
    rows = evidence([run({"hywf": every})], median_only)
    assert verdict(rows["hywf"]) == "not established: page-load time without a confidence interval"


def test_the_section_lists_none_first_and_needs_a_web_run() -> None:
    assert goal_section([run({"hywf": {"kfp": 0.2}}, collection={"condition": "single"})], None) == []
    lines = goal_section([run({"hywf:ncons=300": {"kfp": 0.25}, "hywf": {"kfp": 0.4},
                               "hywf:ncons=1000": {"kfp": 0.3}, "none": {"kfp": 0.9, "df": 0.95}})],
                         bench({"hywf": 1.02}))
    rows = [line.split(" | ")[0] for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert rows == ["| none", "| hywf", "| hywf:ncons=300", "| hywf:ncons=1000"]
    table = "\n".join(lines)
    assert "| none | DF 95.0 | DF 95.0 (30 ep.), k-FP 90.0 | +0.0 / - | - | undefended |" in table
    assert "| hywf | k-FP 40.0 | k-FP 40.0 | +0.0 / +0.0 | +2.0 (+2.0 to +2.0, 40 pages) | **not met** |" in table


def test_a_further_run_settles_the_page_load_time_only_where_runs_agree() -> None:
    """One run's interval covers its own pages, not the next run's move:
    the time is within the goal when every run's interval is, beyond it
    when every run's is, and otherwise the runs disagree."""
    every = {"kfp": 0.2, "df": 0.25, "tiktok": 0.22, "rf": 0.3}
    runs = [run({"hywf": every, "hywf-ap": every})]
    first = bench({"hywf": 1.05, "hywf-ap": 1.2})
    inside, beyond = bench({"hywf": 1.02}), bench({"hywf": 1.3, "hywf-ap": 1.25})
    assert verdict(evidence(runs, first, [inside])["hywf"]) == "met"
    rows = evidence(runs, first, [beyond])
    assert verdict(rows["hywf"]) == "not established: page-load time runs disagree (2 runs)"
    assert verdict(rows["hywf-ap"]) == "**not met**"  # beyond in both runs
    # a run without per-page times, or of a defence no result names, adds nothing
    median_only = bench({"hywf": 1.3})
    del median_only["page_times_s"]
    rows = evidence(runs, first, [median_only, bench({"front": 1.3})])
    assert not rows["hywf"].page_time_again and "front" not in rows
    table = "\n".join(goal_section(runs, first, [beyond]))
    assert "| +5.0 (+5.0 to +5.0, 40 pages); again +30.0 (+30.0 to +30.0, 40 pages) |" in table
