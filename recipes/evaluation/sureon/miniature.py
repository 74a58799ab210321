"""The Sureon paper's construction results in miniature, from the files a ``sureon reproduce`` run leaves behind.

Each function reads what a real run writes (curation decisions, prediction files, trainer logs) and returns plain
JSON data; :func:`render_markdown` lays it out in the Sureon paper's shapes:

- **Table 8**: blind accuracy of an off-the-shelf guesser (OS) and of a blind fine-tuned one (FT) on the validation
  pool, raw and curated;
- **stage 3's own figures**: rows removed by the cross-validated guessers, and the recall and precision of the rows
  with a planted shortcut among them (the world's ground truth), per kind;
- **Table 4**: visual (S_v) and blind (S_wv) accuracy and the multimodal gain MG = S_v - S_wv with bootstrap
  intervals, for the recipe trained on the raw and on the curated training set, and McNemar between the two;
- **GRPO**: the mean reward per step and the benchmark before and after;
- **learning curves**: training loss per logged step, visual and blind accuracy per saved checkpoint.
"""

import json
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
    diff = np.array([float(visual[i]) - float(blind[i]) for i in ids])
    rng = np.random.default_rng(_seed(seed_parts, ids))
    means = diff[rng.integers(0, len(ids), size=(N_RESAMPLES, len(ids)))].mean(axis=1)
    tail = (1 - CONFIDENCE) / 2
    return {
        "gain": 100.0 * float(diff.mean()),
        "ci_low": 100.0 * float(np.quantile(means, tail)),
        "ci_high": 100.0 * float(np.quantile(means, 1 - tail)),
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
    rows, outcomes = {}, {}
    for name, path in runs.items():
        result = score_model(*one_model(path))
        if set(result.modes) != {"visual", "blind"}:
            raise InputError(f"{path}: Table 4 needs both modes (sureon eval sureon --mode both)")
        visual, blind = result.modes["visual"], result.modes["blind"]
        outcomes[name] = {"visual": visual.outcomes, "blind": blind.outcomes}
        rows[name] = {
            "S_v": visual.estimates[OVERALL].as_dict(),
            "S_wv": blind.estimates[OVERALL].as_dict(),
            "MG": paired_gain(visual.outcomes, blind.outcomes, name),
            "per_category_visual": {k: e.accuracy for k, e in visual.estimates.items() if k != OVERALL},
        }
        if row_kinds is not None:
            rows[name]["by_row_kind"] = _by_row_kind(visual.outcomes, blind.outcomes, row_kinds)
    names = list(runs)
    tests = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            for mode in ("visual", "blind"):
                shared = sorted(outcomes[a][mode].keys() & outcomes[b][mode].keys())
                test = mcnemar_test([outcomes[a][mode][q] for q in shared], [outcomes[b][mode][q] for q in shared])
                tests.append({"a": a, "b": b, "mode": mode, "items": len(shared)} | _test_dict(test))
    return {"runs": rows, "mcnemar": tests}


def _by_row_kind(visual: dict[str, bool], blind: dict[str, bool], row_kinds: dict[str, str]) -> dict:
    missing = sorted(set(visual) - set(row_kinds))
    if missing:
        raise InputError(f"{len(missing)} benchmark question(s) have no ground truth (e.g. {missing[0]})")
    table = {}
    for kind in sorted({row_kinds[q] for q in visual}):
        ids = [q for q in visual if row_kinds[q] == kind]
        table[kind] = {
            "items": len(ids),
            "S_v": 100.0 * sum(visual[q] for q in ids) / len(ids),
            "S_wv": 100.0 * sum(blind.get(q, False) for q in ids) / len(ids),
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


def checkpoint_accuracies(paths: dict[int, Path]) -> list[dict]:
    """``[{step, visual, blind}]`` (pooled accuracy, percent) from each checkpoint's ``--mode both`` predictions."""
    curve = []
    for step, path in sorted(paths.items()):
        modes = score_model(*one_model(path)).modes
        curve.append({"step": step} | {mode: modes[mode].estimates[OVERALL].accuracy for mode in modes})
    return curve


# ------------------------------------------------------------------------------------------------------ render


def _pct(value) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def _est(e: dict) -> str:
    low, high = e["bootstrap_ci"]
    return f"{e['accuracy']:.1f} [{low:.1f}, {high:.1f}]"


def render_markdown(report: dict) -> str:
    lines = ["# Sureon's construction method in miniature", ""]
    lines += [report.get("preamble", ""), ""]
    if "table8" in report:
        lines += ["## Table 8 in miniature: blind accuracy on the validation pool (%)", ""]
        lines += ["| validation pool | questions | OS | FT |", "| --- | --- | --- | --- |"]
        for pool, row in report["table8"].items():
            lines.append(f"| {pool} | {row['OS']['n']} | {_est(row['OS'])} | {_est(row['FT'])} |")
        lines += ["", report.get("table8_note", ""), ""]
    for split, figures in (report.get("stage3") or {}).items():
        lines += [f"## Stage 3 on {split}: what blind curation removed", ""]
        lines.append(
            f"{figures['removed']} of {figures['scored']} scored questions removed: {figures['removed_planted']} of "
            f"the {figures['planted']} with a planted shortcut (recall {_pct(figures['recall'])} %) and "
            f"{figures['removed_plain']} of the {figures['plain']} plain ones ({_pct(figures['plain_removed_rate'])}"
            f" %); precision {_pct(figures['precision'])} %."
        )
        if figures["by_kind"]:
            lines += ["", "| shortcut | planted | removed | recall (%) |", "| --- | --- | --- | --- |"]
            for kind, row in figures["by_kind"].items():
                lines.append(f"| {kind} | {row['planted']} | {row['removed']} | {_pct(row['recall'])} |")
        lines.append("")
    if "table4" in report:
        lines += ["## Table 4 in miniature: the recipe trained on raw vs curated data (%)", ""]
        lines += ["| training set | rows | S_v | S_wv | MG |", "| --- | --- | --- | --- | --- |"]
        for name, row in report["table4"]["runs"].items():
            mg = row["MG"]
            rows_trained = report.get("training_rows", {}).get(name, "-")
            lines.append(
                f"| {name} | {rows_trained} | {_est(row['S_v'])} | {_est(row['S_wv'])} | "
                f"{mg['gain']:.1f} [{mg['ci_low']:.1f}, {mg['ci_high']:.1f}] |"
            )
        lines += ["", "| pair | mode | items | only the first right | only the second right | p (McNemar) |"]
        lines.append("| --- | --- | --- | --- | --- | --- |")
        for test in report["table4"]["mcnemar"]:
            lines.append(
                f"| {test['a']} vs {test['b']} | {test['mode']} | {test['items']} | {test['only_a']} | "
                f"{test['only_b']} | {test['pvalue']:.3g} |"
            )
        runs = report["table4"]["runs"]
        if all("by_row_kind" in row for row in runs.values()):
            lines += ["", "| run | benchmark rows | items | S_v | S_wv |", "| --- | --- | --- | --- | --- |"]
            for name, row in runs.items():
                for kind, cell in row["by_row_kind"].items():
                    lines.append(f"| {name} | {kind} | {cell['items']} | {cell['S_v']:.1f} | {cell['S_wv']:.1f} |")
        if {"raw", "curated"} <= runs.keys():
            delta = runs["curated"]["MG"]["gain"] - runs["raw"]["MG"]["gain"]
            lines += ["", f"MG(curated) - MG(raw) = {delta:+.1f} points on this run."]
        lines.append("")
    if "grpo" in report:
        grpo = report["grpo"]
        start = f"its checkpoint at step {grpo['from_step']}" if grpo.get("from_step") else "its finished run"
        lines += [f"## GRPO from the curated SFT run ({start})", ""]
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
    """Loss per step and accuracy per checkpoint of each SFT run, and GRPO's rewards; returns ``{name: file}``."""
    from builders.plots import pyplot, save_figure

    plt = pyplot()
    plots = {}
    curves = report.get("curves") or {}

    def lines(series: dict[str, list[tuple[int, float]]], xlabel: str, ylabel: str, file: str, title: str) -> None:
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for name, points in series.items():
            ax.plot([s for s, _ in points], [v for _, v in points], label=name)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.legend()
        save_figure(fig, out / file)
        plots[title] = file

    if curves.get("loss"):
        lines(curves["loss"], "step", "training loss", "loss.png", "training loss")
    if curves.get("accuracy"):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for name, points in curves["accuracy"].items():
            steps = [p["step"] for p in points]
            ax.plot(steps, [p["visual"] for p in points], marker="o", label=f"{name} visual")
            ax.plot(steps, [p["blind"] for p in points], marker="x", linestyle="--", label=f"{name} blind")
        if report.get("chance") is not None:
            ax.axhline(report["chance"], color="grey", linewidth=0.8, label="random")
        ax.set_xlabel("step")
        ax.set_ylabel("benchmark accuracy (%)")
        ax.legend(fontsize=7)
        save_figure(fig, out / "accuracy.png")
        plots["benchmark accuracy per checkpoint"] = "accuracy.png"
    if (report.get("grpo") or {}).get("rewards"):
        lines(report["grpo"]["rewards"], "GRPO step", "mean reward", "grpo_rewards.png", "GRPO rewards")
    return plots


# ------------------------------------------------------------------------------------------------- a whole run


PREAMBLE = (
    "A synthetic world whose answers lie only in the frames (`sureon world`), with language shortcuts planted on part "
    "of its training and validation rows; blind guessers trained by the guesser recipe; blind-test curation by "
    "`sureon curate`; the SFT recipe trained on the raw and on the curated training set for the same number of steps; "
    "both evaluated visual and blind on the world's benchmark (`sureon eval sureon --mode both`). Intervals are 95 % "
    "percentile bootstraps over questions."
)
WHAT_IT_SHOWS = (
    "What it can show: that frames, labels, prompts, folds and curation fit together; that blind guessers trained on "
    "held-out folds find the rows a language shortcut answers (stage 3's recall and precision above, against the "
    "planted truth); that the curated pool no longer rewards a blind model (Table 8); and, when the recipe has "
    "learned from the frames (visual accuracy above blind), whether training on the curated rows raises the "
    "multimodal gain (Table 4's MG rows above: read them with their intervals, and by benchmark row kind: residual "
    "shortcuts reward a learned language prior, decoys punish it). It does not show the Sureon paper's numbers: the "
    "world's shortcuts are planted and simple, its vision is colours, patterns and motion drawn on a dark field, "
    "the models have a few hundred thousand parameters, the benchmark's decoys are planted by the world rather than "
    "made by stage 3's distractor hardening (which this run does not apply to the training rows either), and "
    "nothing here measures stage 2's distractor generation (the Sureon paper's middle row of Table 4) or stage 4's "
    "expert review."
)


def assemble(
    out: Path,
    *,
    truth: dict[str, str | None] | None,
    frames: int,
    folds: int,
    grpo_start: tuple[int, Path] | None = None,
    row_kinds: dict[str, str] | None = None,
) -> dict:
    """Every figure of a ``sureon reproduce`` folder (see that command for the layout) as plain data.
    ``grpo_start``: the SFT step GRPO started from (0: the finished run) and that model's benchmark predictions;
    ``row_kinds``: what each benchmark row's text does for a blind model (a world's truth), for Table 4 by row kind."""
    out = Path(out)
    report: dict = {"preamble": PREAMBLE, "what_it_shows": WHAT_IT_SHOWS, "frames": frames, "folds": folds}
    report["table8"] = {
        pool: {
            column: blind_accuracy(out / "blind" / f"{column}-{pool}" / "predictions.jsonl") for column in ("OS", "FT")
        }
        for pool in ("raw", "curated")
    }
    report["table8_note"] = (
        "OS: a blind guesser trained on an independent world with the same kinds of shortcut (the miniature's "
        "off-the-shelf model, which knows shortcuts but not this data); FT: a blind guesser fine-tuned on this "
        "world's training split (raw: every row; curated: the rows blind curation kept). The raw pool is every "
        "validation question, the curated one those that passed `sureon curate`."
    )
    if truth is not None:
        report["stage3"] = {
            split: shortcut_recovery(read_decisions(out / "curation" / split), truth)
            for split in ("train", "validation")
        }
    report["table4"] = table4(
        {name: out / "eval" / name / "predictions.jsonl" for name in ("raw", "curated")}, row_kinds=row_kinds
    )
    report["training_rows"] = {name: _training_rows(out / "sft" / name) for name in ("raw", "curated")}
    _, predictions = one_model(out / "eval" / "curated" / "predictions.jsonl")
    items = {p.question_id: p for p in predictions if p.scored_by == "accuracy"}
    from recipes.evaluation.sureon.metrics import random_baseline

    report["chance"] = random_baseline(items).get(OVERALL)
    report["curves"] = {
        "loss": {name: loss_curve(out / "sft" / name) for name in ("raw", "curated")},
        "accuracy": {
            name: checkpoint_accuracies(
                {
                    int(folder.name.split("-")[-1]): folder / "predictions.jsonl"
                    for folder in (out / "eval" / "checkpoints").glob(f"{name}-checkpoint-*")
                }
            )
            for name in ("raw", "curated")
        },
    }
    if (out / "grpo").is_dir():
        rewards = reward_curve(out / "grpo")
        step, before_path = grpo_start or (0, out / "eval" / "curated" / "predictions.jsonl")
        before = _visual_by_subset(before_path)
        after = _visual_by_subset(out / "eval" / "grpo" / "predictions.jsonl")
        report["grpo"] = {
            "rewards": rewards,
            "early_late": {name: early_late(curve) for name, curve in rewards.items() if len(curve) >= 2},
            "from_step": step,
            "before": before,
            "after": after,
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
