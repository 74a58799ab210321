"""The Sureon paper's construction results in miniature, from the files a ``sureon reproduce`` run leaves behind.

Each function reads what a real run writes (releases, curation decisions, prediction files, trainer logs) and
returns plain JSON data; :func:`render_markdown` lays it out in the Sureon paper's shapes:

- **Table 4** with its three arms (the recipe trained on stage-1 distractors, on stage-2 RADG distractors, on the
  blind-curated stage-2 rows): visual (S_v) and blind (S_wv) accuracy and the multimodal gain MG = S_v - S_wv with
  bootstrap intervals, per training seed and pooled over seeds, and the paired bootstrap of the MG difference between
  consecutive arms (over questions, pooled over seeds), by benchmark row kind too;
- **Table 8** per arm: blind accuracy of an off-the-shelf guesser (OS) on the arm's training rows and of a blind
  guesser fine-tuned on them (FT) on the arm's validation pool;
- **stage 2's own figures**: how often the correct option is the longest one, and how often a distractor is, before
  and after;
- **stage 3's own figures**: rows removed by the cross-validated guessers, and the recall and precision of the rows
  with a planted shortcut among them (the world's ground truth), per kind;
- **Algorithm 1's room**: how many distractor configurations each training row's stage-2 pool offers;
- **GRPO** (when run): the mean reward per step and the benchmark before and after;
- **learning curves**: training loss per logged step of each arm's first run.
"""

import json
from itertools import pairwise
from pathlib import Path

import numpy as np

from builders.errors import InputError
from recipes.evaluation.stats import CONFIDENCE, N_RESAMPLES, mcnemar_test
from recipes.evaluation.sureon.metrics import OVERALL, read_predictions, score_model


# ----------------------------------------------------------------------------------------------------- stage 3


def read_decisions(curation_dir: Path) -> dict[str, dict]:
    """``{question_id: decision}`` from a ``sureon curate`` output folder's ``decisions.jsonl``."""
    path = Path(curation_dir) / "decisions.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: not a `sureon curate` output (no decisions.jsonl)")
    return {d["question_id"]: d for d in map(json.loads, path.read_text().splitlines()) if d}


def shortcut_recovery(decisions: dict[str, dict], truth: dict[str, str | None]) -> dict:
    """How well blind curation removed the planted rows: counts, recall and precision overall and per kind.

    Only questions the curation scored count (it passes sequence summaries through unscored); a question missing
    from the ground truth is an error, since recall over a partial truth would mislead."""
    missing = sorted(set(decisions) - set(truth))
    if missing:
        raise InputError(f"{len(missing)} curated question(s) have no ground truth (e.g. {missing[0]})")
    scored = {qid: d for qid, d in decisions.items() if d.get("scores")}
    removed = {qid for qid, d in scored.items() if not d["passes"]}
    planted = {qid for qid in scored if truth[qid]}
    kinds = sorted({truth[qid] for qid in planted})
    hits = removed & planted

    def ratio(num: int, den: int) -> float | None:
        return num / den if den else None

    return {
        "scored": len(scored),
        "removed": len(removed),
        "planted": len(planted),
        "removed_planted": len(hits),
        "removed_plain": len(removed - planted),
        "plain": len(scored) - len(planted),
        "recall": ratio(len(hits), len(planted)),
        "precision": ratio(len(hits), len(removed)),
        "plain_removed_rate": ratio(len(removed - planted), len(scored) - len(planted)),
        "by_kind": {
            kind: {
                "planted": sum(truth[q] == kind for q in planted),
                "removed": sum(truth[q] == kind for q in hits),
                "recall": ratio(sum(truth[q] == kind for q in hits), sum(truth[q] == kind for q in planted)),
            }
            for kind in kinds
        },
    }


# ----------------------------------------------------------------------------------------------------- stage 2


def release_rows(release: Path, split: str = "train", passing_only: bool = False) -> list[dict]:
    """The rows of one split of a release folder (the official layout, or a ``sureon pipeline`` output); with
    ``passing_only``, those whose ``passes_blind_curation`` is true (a curated release's training rows)."""
    import pyarrow.parquet as pq

    from builders.sureon.release import find_split_files

    rows = [row for path in find_split_files(Path(release)).get(split, []) for row in pq.read_table(path).to_pylist()]
    return [row for row in rows if row.get("passes_blind_curation")] if passing_only else rows


def length_cue(rows: list[dict]) -> dict:
    """The Sureon paper's Fig. 9 in one number or two: over the rows with options, how often the correct option is
    the only longest one (in words), how often a distractor is (where a learned "take the longest" fails), and the
    correct option's mean length against the distractors' (words)."""
    longest, distractor_longest, ratios = 0, 0, []
    for row in rows:
        options = row.get("options") or []
        if len(options) < 2:
            continue
        words = [len(o["text"].split()) for o in options]
        correct = [w for w, o in zip(words, options, strict=True) if o["correct"]]
        others = [w for w, o in zip(words, options, strict=True) if not o["correct"]]
        if len(correct) != 1:
            continue
        longest += correct[0] > max(others)
        distractor_longest += max(others) > correct[0] and others.count(max(others)) == 1
        ratios.append(correct[0] / (sum(others) / len(others)))
    return {
        "rows": len(ratios),
        "correct_longest": longest / len(ratios) if ratios else None,
        "distractor_longest": distractor_longest / len(ratios) if ratios else None,
        "length_ratio": float(np.mean(ratios)) if ratios else None,
    }


def hardening_room(rows: list[dict]) -> dict:
    """How many distinct distractor configurations each row's stage-2 pool offers at its option count: Algorithm 1
    (the Sureon paper's B.4.3) redraws a row's distractors from its pool, which it can only do when the pool holds
    more distractors than the options show."""
    from math import comb

    rooms = [
        comb(len(row.get("distractor_pool") or []), len(row["options"]) - 1)
        for row in rows
        if len(row.get("options") or []) > 1
    ]
    return {
        "rows": len(rooms),
        "one_configuration": sum(r <= 1 for r in rooms),
        "median_configurations": float(np.median(rooms)) if rooms else None,
    }


# ------------------------------------------------------------------------------------------------------ tables


def one_model(path: Path) -> tuple[str, list]:
    """``(model, predictions)`` of a prediction file written by one ``sureon eval sureon`` run."""
    models = read_predictions(path)
    if len(models) != 1:
        raise InputError(f"{path}: expected one model's predictions, found {sorted(models)}")
    return next(iter(models.items()))


def blind_accuracy(predictions: Path) -> dict:
    """Pooled blind accuracy (with its interval) of one ``sureon eval sureon --mode blind`` run."""
    result = score_model(*one_model(predictions))
    if "blind" not in result.modes:
        raise InputError(f"{predictions}: no blind predictions")
    return result.modes["blind"].estimates[OVERALL].as_dict()


def paired_gain(visual: dict[str, bool], blind: dict[str, bool], *seed_parts: str) -> dict:
    """MG = S_v - S_wv in points with a percentile bootstrap interval over items (both passes resampled together)."""
    ids = sorted(visual.keys() & blind.keys())
    if not ids:
        raise InputError("the visual and blind passes share no item")
    return bootstrap_mean([float(visual[i]) - float(blind[i]) for i in ids], ids, *seed_parts)


def bootstrap_mean(values: list[float], ids: list[str], *seed_parts: str) -> dict:
    """The mean of per-item ``values`` in points, its 95 % percentile bootstrap interval over items, and the
    two-sided bootstrap p-value of "the mean is 0" (twice the smaller share of resampled means on either side of 0,
    at least 1 / resamples), seeded from the items so that a report repeats exactly."""
    values = np.asarray(values, dtype=float)
    rng = np.random.default_rng(_seed(seed_parts, ids))
    means = values[rng.integers(0, len(ids), size=(N_RESAMPLES, len(ids)))].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2
    side = min(float(np.mean(means <= 0)), float(np.mean(means >= 0)))
    return {
        "gain": 100.0 * float(values.mean()),
        "ci_low": 100.0 * float(np.quantile(means, tail)),
        "ci_high": 100.0 * float(np.quantile(means, 1 - tail)),
        "p_zero": min(1.0, max(2 * side, 1 / N_RESAMPLES)),
        "items": len(ids),
    }


def _seed(seed_parts, ids) -> int:
    from builders.options import stable_seed

    return stable_seed("multimodal-gain", *seed_parts, *ids) % 2**32


def table4(runs: dict[str, Path], row_kinds: dict[str, str] | None = None) -> dict:
    """S_v, S_wv and MG per run (``{name: predictions.jsonl}``, both modes), and McNemar between every two runs'
    visual and blind outcomes. With ``row_kinds`` (``{question_id: kind}``, :func:`builders.sureon.world.row_kinds`),
    S_v and S_wv on each kind of benchmark row too: where a learned language prior wins (residual shortcuts) and
    where it loses (decoys)."""
    return _table4_of({name: _both_modes(path) for name, path in runs.items()}, row_kinds)


def _table4_of(scored: dict, row_kinds: dict[str, str] | None) -> dict:
    """:func:`table4` of runs already scored (``{name: (visual, blind)}`` mode results)."""
    rows, outcomes = {}, {}
    for name, (visual, blind) in scored.items():
        outcomes[name] = {"visual": visual.outcomes, "blind": blind.outcomes}
        rows[name] = {
            "S_v": visual.estimates[OVERALL].as_dict(),
            "S_wv": blind.estimates[OVERALL].as_dict(),
            "MG": paired_gain(visual.outcomes, blind.outcomes, name),
            "per_category_visual": {k: e.accuracy for k, e in visual.estimates.items() if k != OVERALL},
        }
        if row_kinds is not None:
            rows[name]["by_row_kind"] = _by_row_kind(visual.outcomes, blind.outcomes, row_kinds)
    names = list(scored)
    tests = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for mode in ("visual", "blind"):
                shared = sorted(outcomes[a][mode].keys() & outcomes[b][mode].keys())
                test = mcnemar_test([outcomes[a][mode][q] for q in shared], [outcomes[b][mode][q] for q in shared])
                tests.append({"a": a, "b": b, "mode": mode, "items": len(shared)} | _test_dict(test))
    return {"runs": rows, "mcnemar": tests}


def arms_over_seeds(runs: dict[str, list[Path]], row_kinds: dict[str, str] | None = None) -> dict:
    """Table 4 with several training seeds: ``runs`` is ``{arm: [predictions.jsonl of each seed]}`` (``--mode both``,
    the seeds in the same order for every arm).

    Per seed, each arm's S_v, S_wv and MG (:func:`table4`). Pooled, each question's visual and blind outcome is
    averaged over the seeds, so a question counts once however many seeds ran; MG and the difference of MG between
    consecutive arms are bootstrapped over questions (the benchmark is the sample; the seeds are averaged within a
    question), on the questions every run scored. ``ordered``: per seed, whether MG rises strictly from each arm to
    the next."""
    arms = list(runs)
    counts = {len(paths) for paths in runs.values()}
    if len(counts) != 1 or not counts.pop():
        raise InputError(f"every arm needs the same number of seeds, got {[len(p) for p in runs.values()]}")
    scored = {arm: [_both_modes(path) for path in paths] for arm, paths in runs.items()}  # each file scored once
    per_seed = [_table4_of({arm: scored[arm][i] for arm in arms}, row_kinds) for i in range(len(runs[arms[0]]))]
    outcomes = [(v.outcomes, b.outcomes) for seeds in scored.values() for v, b in seeds]
    ids = sorted(set.intersection(*(set(v) & set(b) for v, b in outcomes)))
    if not ids:
        raise InputError("the runs share no benchmark question")

    def mean_over_seeds(arm: str, mode: int) -> np.ndarray:
        return np.mean([[float(run[mode].outcomes[q]) for q in ids] for run in scored[arm]], axis=0)

    visual = {arm: mean_over_seeds(arm, 0) for arm in arms}
    blind = {arm: mean_over_seeds(arm, 1) for arm in arms}
    pooled = {
        arm: {
            "S_v": 100.0 * float(visual[arm].mean()),
            "S_wv": 100.0 * float(blind[arm].mean()),
            "MG": bootstrap_mean(list(visual[arm] - blind[arm]), ids, "pooled", arm),
        }
        for arm in arms
    }
    if row_kinds is not None:
        for arm in arms:
            pooled[arm]["by_row_kind"] = _by_row_kind(
                dict(zip(ids, visual[arm], strict=True)), dict(zip(ids, blind[arm], strict=True)), row_kinds
            )
    differences = []
    for a, b in pairwise(arms):
        gain_a, gain_b = visual[a] - blind[a], visual[b] - blind[b]
        differences.append({"a": a, "b": b} | bootstrap_mean(list(gain_b - gain_a), ids, "difference", a, b))
    ordered = [
        all(seed["runs"][a]["MG"]["gain"] < seed["runs"][b]["MG"]["gain"] for a, b in pairwise(arms))
        for seed in per_seed
    ]
    return {"per_seed": per_seed, "pooled": pooled, "differences": differences, "ordered": ordered}


def _both_modes(path: Path) -> tuple:
    """The visual and the blind mode results of one ``--mode both`` prediction file."""
    result = score_model(*one_model(path))
    if set(result.modes) != {"visual", "blind"}:
        raise InputError(f"{path}: Table 4 needs both modes (sureon eval sureon --mode both)")
    return result.modes["visual"], result.modes["blind"]


def _by_row_kind(visual: dict[str, bool], blind: dict[str, bool], row_kinds: dict[str, str]) -> dict:
    missing = sorted(set(visual) - set(row_kinds))
    if missing:
        raise InputError(f"{len(missing)} benchmark question(s) have no ground truth (e.g. {missing[0]})")
    table = {}
    for kind in sorted({row_kinds[q] for q in visual}):
        ids = [q for q in visual if row_kinds[q] == kind]
        table[kind] = {
            "items": len(ids),
            "S_v": 100.0 * float(sum(visual[q] for q in ids)) / len(ids),
            "S_wv": 100.0 * float(sum(blind.get(q, False) for q in ids)) / len(ids),
        }
    return table


def _test_dict(test) -> dict:
    return {
        "only_a": test.only_a,
        "only_b": test.only_b,
        "statistic": test.statistic,
        "pvalue": test.pvalue,
        "method": test.method,
    }


# ----------------------------------------------------------------------------------------------------- training


def log_history(run_dir: Path) -> list[dict]:
    """The trainer's log lines (``trainer_state.json`` of the run's last checkpoint, or of the run itself)."""
    run_dir = Path(run_dir)
    candidates = [run_dir / "trainer_state.json"] + sorted(
        run_dir.glob("checkpoint-*/trainer_state.json"), key=lambda p: int(p.parent.name.split("-")[1])
    )
    states = [p for p in candidates if p.is_file()]
    if not states:
        raise FileNotFoundError(f"{run_dir}: no trainer_state.json (the run kept no checkpoint)")
    return json.loads(states[-1].read_text())["log_history"]


def loss_curve(run_dir: Path) -> list[tuple[int, float]]:
    return [(e["step"], e["loss"]) for e in log_history(run_dir) if "loss" in e and "step" in e]


def reward_curve(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """``{reward name: [(step, mean)]}`` from a GRPO run's logs (TRL logs ``reward`` and ``rewards/<name>/mean``)."""
    curves: dict[str, list[tuple[int, float]]] = {}
    for entry in log_history(run_dir):
        for key, value in entry.items():
            if key == "reward" or (key.startswith("rewards/") and key.endswith("/mean")):
                name = "total" if key == "reward" else key.split("/")[1]
                if value is not None and not (isinstance(value, float) and np.isnan(value)):
                    curves.setdefault(name, []).append((entry["step"], float(value)))
    return curves


def early_late(curve: list[tuple[int, float]], share: float = 1 / 3) -> tuple[float, float]:
    """Mean of the first and of the last ``share`` of a curve's points (a learning signal robust to noise)."""
    if len(curve) < 2:
        raise InputError("a curve of fewer than two points has no early and late part")
    count = max(1, round(len(curve) * share))
    values = [v for _, v in curve]
    return float(np.mean(values[:count])), float(np.mean(values[-count:]))


# ------------------------------------------------------------------------------------------------------ render


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _est(e: dict) -> str:
    low, high = e["bootstrap_ci"]
    return f"{e['accuracy']:.1f} [{low:.1f}, {high:.1f}]"


def _interval(e: dict) -> str:
    return f"{e['gain']:+.1f} [{e['ci_low']:+.1f}, {e['ci_high']:+.1f}]"


def _p(value: float) -> str:
    return f"< {1 / N_RESAMPLES:g}" if value <= 1 / N_RESAMPLES else f"{value:.3g}"


DIFFERENCE_NOTE = (
    "Over questions, pooled over seeds: an interval excluding 0 is the significance the Sureon paper's Table 4 does "
    "not print."
)
ARM_TITLES = {
    "stage1": "Stage 1 (baseline distractors)",
    "stage2": "Stage 2 (RADG)",
    "stage3": "Stage 3 (blind-test curation)",
}


def render_markdown(report: dict) -> str:
    lines = ["# Sureon's construction method in miniature", ""]
    lines += [report.get("preamble", ""), ""]
    titles = {arm: ARM_TITLES.get(arm, arm) for arm in report.get("arms", [])}
    if "table4" in report:
        table = report["table4"]
        seeds = report.get("seeds", [])
        lines += [
            f"## Table 4 in miniature: the recipe trained on each stage's rows ({len(seeds)} training seeds)",
            "",
        ]
        lines += ["| distractors | # training rows | S_v | S_wv | MG |", "| --- | --- | --- | --- | --- |"]
        for arm, row in table["pooled"].items():
            rows_trained = report.get("training_rows", {}).get(arm, "-")
            lines.append(
                f"| {titles[arm]} | {rows_trained} | {row['S_v']:.1f} | {row['S_wv']:.1f} | {_interval(row['MG'])} |"
            )
        lines += ["", "Pooled over the seeds (each question's outcome averaged over them); MG with its 95 % interval."]
        lines += ["", "| seed | " + " | ".join(f"MG {arm}" for arm in table["pooled"]) + " | MG rises |"]
        lines.append("| --- " * (len(table["pooled"]) + 2) + "|")
        for seed, run, ordered in zip(seeds, table["per_seed"], table["ordered"], strict=True):
            cells = " | ".join(_interval(run["runs"][arm]["MG"]) for arm in table["pooled"])
            lines.append(f"| {seed} | {cells} | {'yes' if ordered else 'no'} |")
        lines += ["", "| paired difference | MG difference | p (bootstrap) |", "| --- | --- | --- |"]
        for diff in table["differences"]:
            lines.append(f"| MG({diff['b']}) - MG({diff['a']}) | {_interval(diff)} | {_p(diff['p_zero'])} |")
        lines += ["", DIFFERENCE_NOTE]
        if all("by_row_kind" in row for row in table["pooled"].values()):
            kinds = sorted({k for row in table["pooled"].values() for k in row["by_row_kind"]})
            lines += [
                "",
                "| benchmark rows | items | " + " | ".join(f"{arm} S_v / S_wv" for arm in table["pooled"]) + " |",
            ]
            lines.append("| --- " * (len(table["pooled"]) + 2) + "|")
            for kind in kinds:
                cells = [table["pooled"][arm]["by_row_kind"].get(kind) for arm in table["pooled"]]
                items = next(c["items"] for c in cells if c)
                text = " | ".join(f"{c['S_v']:.1f} / {c['S_wv']:.1f}" if c else "-" for c in cells)
                lines.append(f"| {kind} | {items} | {text} |")
        lines.append("")
    if "table8" in report:
        lines += ["## Table 8 in miniature: blind accuracy per arm (%)", ""]
        lines += ["| distractors | OS (training rows) | FT (validation pool) |", "| --- | --- | --- |"]
        for arm, row in report["table8"].items():
            os_, ft = row["OS"], row["FT"]
            lines.append(f"| {titles[arm]} | {_est(os_)} (n = {os_['n']}) | {_est(ft)} (n = {ft['n']}) |")
        lines += ["", report.get("table8_note", ""), ""]
    if "length_cue" in report:
        lines += ["## Stage 2: the length shortcut before and after (training rows)", ""]
        lines.append(
            "| rows | count | correct option the longest (%) | a distractor the longest (%) "
            "| correct / distractor length |"
        )
        lines.append("| --- | --- | --- | --- | --- |")
        for arm, cue in report["length_cue"].items():
            ratio = "-" if cue["length_ratio"] is None else f"{cue['length_ratio']:.2f}"
            longest = f"{_pct(cue['correct_longest'])} | {_pct(cue['distractor_longest'])}"
            lines.append(f"| {titles[arm]} | {cue['rows']} | {longest} | {ratio} |")
        lines.append("")
    for split, figures in (report.get("stage3") or {}).items():
        lines += [f"## Stage 3 on the stage-2 {split} rows: what blind curation removed", ""]
        lines.append(
            f"{figures['removed']} of {figures['scored']} scored questions removed: {figures['removed_planted']} of "
            f"the {figures['planted']} with a planted shortcut (recall {_pct(figures['recall'])} %) and "
            f"{figures['removed_plain']} of the {figures['plain']} plain ones ({_pct(figures['plain_removed_rate'])}"
            f" %); precision {_pct(figures['precision'])} %."
        )
        if figures["by_kind"]:
            lines += [
                "",
                "| shortcut planted at stage 1 | planted | removed | recall (%) |",
                "| --- | --- | --- | --- |",
            ]
            for kind, row in figures["by_kind"].items():
                lines.append(f"| {kind} | {row['planted']} | {row['removed']} | {_pct(row['recall'])} |")
        lines.append("")
    if "hardening_room" in report:
        room = report["hardening_room"]
        lines += ["## Algorithm 1 (distractor hardening) on the training rows", ""]
        lines += [
            f"Of {room['rows']} stage-2 training rows, {room['one_configuration']} have a pool that offers one "
            f"configuration of distractors at their option count (median {room['median_configurations']:g}). "
            + report.get("hardening_note", ""),
            "",
        ]
    if "grpo" in report:
        grpo = report["grpo"]
        start = f"its checkpoint at step {grpo['from_step']}" if grpo.get("from_step") else "its finished run"
        lines += [f"## GRPO from arm 3's first SFT run ({start})", ""]
        lines += ["| reward | first third | last third |", "| --- | --- | --- |"]
        for name, (early, late) in grpo["early_late"].items():
            lines.append(f"| {name} | {early:.3f} | {late:.3f} |")
        lines += ["", "| benchmark (visual, %) | before GRPO | after GRPO |", "| --- | --- | --- |"]
        for subset in grpo["before"]:
            before, after = grpo["before"][subset], grpo["after"].get(subset)
            lines.append(f"| {subset} | {before:.1f} | {'-' if after is None else f'{after:.1f}'} |")
        lines.append("")
    if report.get("plots"):
        lines += ["## Learning curves", ""] + [f"![{name}]({path})" for name, path in report["plots"].items()]
        lines.append("")
    if report.get("what_it_shows"):
        lines += ["## What the miniature does and does not show", "", report["what_it_shows"], ""]
    return "\n".join(lines)


def plot_curves(report: dict, out: Path) -> dict[str, str]:
    """Loss per step of each arm's first SFT run, and GRPO's rewards; returns ``{title: file}``."""
    from builders.plots import pyplot, save_figure

    plt = pyplot()
    plots = {}

    def lines(series: dict[str, list[tuple[int, float]]], xlabel: str, ylabel: str, file: str, title: str) -> None:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for name, points in series.items():
            ax.plot([s for s, _ in points], [v for _, v in points], label=name)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend()
        save_figure(fig, out / file)
        plots[title] = file

    if (report.get("curves") or {}).get("loss"):
        lines(report["curves"]["loss"], "step", "training loss", "loss.png", "training loss (first seed)")
    if (report.get("grpo") or {}).get("rewards"):
        lines(report["grpo"]["rewards"], "GRPO step", "mean reward", "grpo_rewards.png", "GRPO rewards")
    return plots


# ------------------------------------------------------------------------------------------------- a whole run


PREAMBLE = (
    "A synthetic world whose answers lie only in the frames (`sureon world`), with language shortcuts planted on part "
    "of its stage-1 training and validation rows: the correct option longer and more specific than its distractors "
    "(the shortcut stage 1 leaves, the Sureon paper's Fig. 7), and one no distractor text causes (a question worded "
    "from the narration, its correct option always at one letter). Arm 1 trains on that release; arm 2 on it passed "
    "through `sureon pipeline stage2` (real retrieval over the training answers with a sentence-transformers "
    "embedder, the RADG prompt, parsing, validation and mixing, against three loopback endpoints served by a "
    "deterministic stand-in for the generator LLMs, which writes each distractor like one retrieved correct answer "
    "drawn at random, in its length and elaboration, so a pool carries its exemplars' mix of lengths); arm 3 on arm "
    "2's rows that passed `sureon curate` (fold guessers and an off-the-shelf one, trained by the guesser recipe). "
    "The SFT recipe trains the same steps on each arm, once per training seed; every run is evaluated visual and "
    "blind on one benchmark (`sureon eval sureon --mode both`). Intervals are 95 % percentile bootstraps over "
    "questions."
)
WHAT_IT_SHOWS = (
    "What it can show: the mechanism of the Sureon paper's Table 4 end to end with the project's own commands: "
    "whether stage 2 removes the shortcut stage 1's distractors carry (the length figures above), so that a model "
    "trained on its rows stops choosing the longer option (length decoys) and answering the residual length rows "
    "blind; whether stage 3 removes the rows another shortcut answers blind, so that a model trained on what it keeps "
    "stops choosing that shortcut's letter when the question is worded that way (narrated decoys); and whether each "
    "step raises the multimodal gain on every training seed by a margin the paired bootstrap separates from 0 (the "
    "Table 4 section says whether this run did). It does not show the paper's numbers: the world's shortcuts are "
    "planted and simple, its vision is colours and motion drawn on a dark field, the models have a few hundred "
    "thousand parameters, the distractors come from a deterministic stand-in rather than three LLMs (they agree, so "
    "multi-model mixing has nothing to mix here), the benchmark's decoys are planted by the world rather than made by "
    "stage 3's distractor hardening, stage 4's expert review is taken as done on the benchmark (its clips show their "
    "answers), and nothing runs at the 8B scale."
)
HARDENING_NOTE = (
    "A row whose pool offers one configuration leaves Algorithm 1 nothing to redraw: the three stand-in generators "
    "agree on every distractor, so each pool holds the six the options already show. With three real LLMs a pool "
    "holds up to 18 (the Sureon paper's B.3) and Algorithm 1 can search it; the miniature cannot show that effect, "
    "and the benchmark's decoys are planted by the world instead."
)


def assemble(
    out: Path,
    *,
    arms: list[str],
    seeds: list[int],
    releases: dict[str, Path],
    truth: dict[str, str | None] | None,
    frames: int,
    folds: int,
    grpo_start: tuple[int, Path] | None = None,
    row_kinds: dict[str, str] | None = None,
) -> dict:
    """Every figure of a ``sureon reproduce`` folder (see that command for the layout) as plain data.
    ``releases``: each arm's release (arm 3's: the curated one, whose passing training rows it trained on);
    ``grpo_start``: the SFT step GRPO started from (0: the finished run) and that model's benchmark predictions;
    ``row_kinds``: what each benchmark row's text does for a blind model (a world's truth), for Table 4 by row kind."""
    out = Path(out)
    report: dict = {
        "preamble": PREAMBLE,
        "what_it_shows": WHAT_IT_SHOWS,
        "frames": frames,
        "folds": folds,
        "arms": arms,
        "seeds": seeds,
    }
    report["table4"] = arms_over_seeds(
        {arm: [out / "eval" / f"seed{seed}" / arm / "predictions.jsonl" for seed in seeds] for arm in arms},
        row_kinds=row_kinds,
    )
    report["training_rows"] = {arm: _training_rows(out / "sft" / f"seed{seeds[0]}" / arm) for arm in arms}
    report["table8"] = {
        arm: {
            column: blind_accuracy(out / "blind" / f"blind-{column}-{arm}" / "predictions.jsonl")
            for column in ("OS", "FT")
        }
        for arm in arms
    }
    report["table8_note"] = (
        "OS: a blind guesser trained on an independent world's stage-1 rows (the miniature's off-the-shelf model, "
        "which knows shortcuts but not this data), asked every training row of the arm; FT: a blind guesser "
        "fine-tuned on the arm's training rows, asked the arm's validation pool (stage 1's, its stage-2 refinement, "
        "or the stage-2 questions that passed `sureon curate`). Chance is 14.3 % (seven options)."
    )
    training = {arm: release_rows(releases[arm], passing_only=arm == arms[-1]) for arm in arms}
    report["length_cue"] = {arm: length_cue(rows) for arm, rows in training.items()}
    report["hardening_room"] = hardening_room(training[arms[1]])
    report["hardening_note"] = HARDENING_NOTE
    if truth is not None:
        report["stage3"] = {
            split: shortcut_recovery(read_decisions(out / "curation" / split), truth)
            for split in ("train", "validation")
        }
    report["curves"] = {"loss": {arm: loss_curve(out / "sft" / f"seed{seeds[0]}" / arm) for arm in arms}}
    if grpo_start is not None:
        rewards = reward_curve(out / "grpo")
        step, before_path = grpo_start
        report["grpo"] = {
            "rewards": rewards,
            "early_late": {name: early_late(curve) for name, curve in rewards.items() if len(curve) >= 2},
            "from_step": step,
            "before": _visual_by_subset(before_path),
            "after": _visual_by_subset(out / "eval" / "grpo" / "predictions.jsonl"),
        }
    return report


def _training_rows(run_dir: Path) -> int | None:
    marker = Path(run_dir) / "training_complete.json"
    if not marker.is_file():
        return None
    mixture = json.loads(marker.read_text()).get("mixture") or []
    return sum(int(source.get("rows_used") or 0) for source in mixture) if isinstance(mixture, list) else None


def _visual_by_subset(path: Path) -> dict[str, float]:
    visual = score_model(*one_model(path)).modes["visual"]
    return {subset: e.accuracy for subset, e in visual.estimates.items()}


def write_report(report: dict, folder: Path) -> Path:
    """``report.md``, ``report.json`` and the plots into ``folder`` (written whole, then moved into place)."""
    from builders.outputs import staged_output

    folder = Path(folder)
    with staged_output(folder, overwrite=True) as staging:
        report = report | {"plots": plot_curves(report, staging)}
        (staging / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True, default=str) + "\n")
        (staging / "report.md").write_text(render_markdown(report))
    return folder / "report.md"
