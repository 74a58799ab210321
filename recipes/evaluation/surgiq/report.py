"""The SurgiQ paper's tables from several models' prediction files (``sureon eval surgiq`` outputs).

    sureon report surgiq results/*/predictions.jsonl [--labels NAME ...] [--out DIR]

- Table 4: zero-shot accuracy (%) per question type and overall micro accuracy, one row per model (``default``
  config), plus the uniform-guessing row.
- Table 5: calibration per model: top-label ECE, Brier score over the four options, confidence - accuracy gap.
- Table A3: answer-order robustness: accuracy on ``default`` and ``shuffled`` and their difference (shuffled -
  original), on the questions both runs scored, for every model and shot count with both.
- Table 6: per-domain accuracy, mean +- std across models, and Wilcoxon signed-rank tests between every pair of
  domains, paired by model (scipy), with Holm-adjusted p-values (statsmodels). With few models the tests have little
  power; the paper reads them descriptively too.
- Few-shot (Figure 6): accuracy per model and shot count, when runs with shots > 0 are given.

Each argument is a run folder or its ``predictions.jsonl``; the run's ``report.json`` next to it says which model,
config and shot count it holds.
"""

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from builders.errors import InputError
from builders.surgiq.vocabulary import DOMAINS, QUESTION_TYPES, in_vocabulary_order
from recipes.evaluation.surgiq.calibration import DEFAULT_BINS


PREDICTION_KEYS = ("id", "domain", "question_type", "answer", "correct", "probabilities")  # what the tables read


@dataclass
class Run:
    name: str
    config: str
    shots: int
    path: Path
    predictions: list[dict]

    @property
    def num_options(self) -> int:
        return len(self.predictions[0]["probabilities"])


def load_run(path: str | Path, name: str | None = None) -> Run:
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    predictions_file = path if path.is_file() else folder / "predictions.jsonl"
    report_file = folder / "report.json"
    if not predictions_file.is_file() or not report_file.is_file():
        raise FileNotFoundError(f"{path}: expected predictions.jsonl and report.json from `sureon eval surgiq`")
    from recipes.evaluation.sureon.metrics import read_jsonl

    try:
        report = json.loads(report_file.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise InputError(f"{report_file}: not valid JSON ({err}): is it a `sureon eval surgiq` report?") from None
    missing = [key for key in ("model", "config", "shots") if not isinstance(report, dict) or key not in report]
    if missing:
        raise InputError(f"{report_file} lacks {missing}: is it a `sureon eval surgiq` report?")
    predictions = []
    for where, row in read_jsonl(predictions_file):
        absent = [key for key in PREDICTION_KEYS if key not in row]
        if absent:
            raise InputError(f"{where}: no {', '.join(absent)}: is it a `sureon eval surgiq` predictions file?")
        predictions.append(row)
    if not predictions:
        raise InputError(f"{predictions_file} holds no predictions")
    return Run(name or report["model"], report["config"], int(report["shots"]), folder, predictions)


def load_runs(paths: list[str | Path], labels: list[str] | None = None) -> list[Run]:
    if labels and len(labels) != len(paths):
        raise InputError(f"{len(labels)} label(s) for {len(paths)} prediction file(s): give one label per file")
    runs = [load_run(path, labels[i] if labels else None) for i, path in enumerate(paths)]
    seen: dict[tuple, Path] = {}
    for run in runs:
        key = (run.name, run.config, run.shots)
        if key in seen:
            raise InputError(f"two runs of {key}: {seen[key]} and {run.path}; label them apart with --labels")
        seen[key] = run.path
    return runs


def _accuracy(predictions: list[dict]) -> float | None:
    return float(np.mean([p["correct"] for p in predictions])) if predictions else None


def accuracy_table(runs: list[Run]) -> dict:
    """Table 4: zero-shot ``default`` accuracy per question type and overall, per model."""
    selected = [r for r in runs if r.config == "default" and r.shots == 0]
    types = in_vocabulary_order((p["question_type"] for r in selected for p in r.predictions), QUESTION_TYPES)
    rows = [
        {
            "model": run.name,
            "n": len(run.predictions),
            **{t: _accuracy([p for p in run.predictions if p["question_type"] == t]) for t in types},
            "avg": _accuracy(run.predictions),
        }
        for run in selected
    ]
    chance = 1 / selected[0].num_options if selected else 0.25
    return {"columns": types, "rows": rows, "random": chance}


def calibration_table(runs: list[Run], n_bins: int = DEFAULT_BINS) -> list[dict]:
    """Table 5: ECE, Brier and gap of each zero-shot ``default`` run."""
    from recipes.evaluation.surgiq.calibration import calibration_summary

    rows = []
    for run in (r for r in runs if r.config == "default" and r.shots == 0):
        letters = list(run.predictions[0]["probabilities"])
        probabilities = [[p["probabilities"][x] for x in letters] for p in run.predictions]
        labels = [letters.index(p["answer"]) for p in run.predictions]
        summary = calibration_summary(probabilities, labels, n_bins)
        rows.append({"model": run.name, **{k: summary[k] for k in ("accuracy", "ece", "brier", "gap")}})
    return rows


def shuffle_delta_table(runs: list[Run]) -> list[dict]:
    """Table A3: accuracy on ``default`` and ``shuffled`` (the questions both scored) and shuffled - original."""
    by_key = {(r.name, r.config, r.shots): r for r in runs}
    rows = []
    for (name, config, shots), original in by_key.items():
        shuffled = by_key.get((name, "shuffled", shots))
        if config != "default" or shuffled is None:
            continue
        common = {p["id"] for p in original.predictions} & {p["id"] for p in shuffled.predictions}
        a = _accuracy([p for p in original.predictions if p["id"] in common])
        b = _accuracy([p for p in shuffled.predictions if p["id"] in common])
        rows.append({"model": name, "shots": shots, "n": len(common), "original": a, "shuffled": b, "delta": b - a})
    return rows


def domain_table(runs: list[Run]) -> dict:
    """Table 6: per-domain accuracy across zero-shot ``default`` runs, and pairwise Wilcoxon signed-rank tests."""
    from scipy.stats import wilcoxon
    from statsmodels.stats.multitest import multipletests

    selected = [r for r in runs if r.config == "default" and r.shots == 0]
    domains = in_vocabulary_order((p["domain"] for r in selected for p in r.predictions), DOMAINS)
    per_model = {d: [_accuracy([p for p in r.predictions if p["domain"] == d]) for r in selected] for d in domains}
    summary = []
    for d in domains:
        values = [v for v in per_model[d] if v is not None]
        summary.append(
            {
                "domain": d,
                "models": len(values),
                "mean": float(np.mean(values)) if values else None,
                "std": float(np.std(values, ddof=1)) if len(values) > 1 else None,
            }
        )
    tests = []
    for a, b in itertools.combinations(domains, 2):
        pairs = [(x, y) for x, y in zip(per_model[a], per_model[b], strict=True) if x is not None and y is not None]
        test = {"a": a, "b": b, "models": len(pairs), "statistic": None, "p": None, "note": ""}
        if len(pairs) < 2:
            test["note"] = "fewer than two models"
        elif all(x == y for x, y in pairs):
            test["note"] = "identical accuracies"
        else:
            result = wilcoxon([x for x, _ in pairs], [y for _, y in pairs])
            test["statistic"], test["p"] = float(result.statistic), float(result.pvalue)
        tests.append(test)
    tested = [t for t in tests if t["p"] is not None]
    if tested:
        adjusted = multipletests([t["p"] for t in tested], method="holm")[1]
        for test, p in zip(tested, adjusted, strict=True):
            test["p_holm"] = float(p)
    return {"domains": summary, "wilcoxon": tests}


def fewshot_table(runs: list[Run]) -> list[dict]:
    """Figure 6: accuracy per model (``default`` config) and shot count."""
    table: dict[str, dict[int, float]] = {}
    for run in runs:
        if run.config == "default":
            table.setdefault(run.name, {})[run.shots] = _accuracy(run.predictions)
    return [{"model": name, "by_shots": dict(sorted(shots.items()))} for name, shots in table.items()]


def build_report(runs: list[Run], n_bins: int = DEFAULT_BINS) -> dict:
    return {
        "runs": [{"model": r.name, "config": r.config, "shots": r.shots, "path": str(r.path)} for r in runs],
        "table4_accuracy": accuracy_table(runs),
        "table5_calibration": calibration_table(runs, n_bins),
        "table6_domains": domain_table(runs),
        "tableA3_shuffled": shuffle_delta_table(runs),
        "fewshot": fewshot_table(runs) if any(r.shots for r in runs) else [],
        "n_bins": n_bins,
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def _num(value: float | None, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def report_markdown(report: dict) -> str:
    t4 = report["table4_accuracy"]
    lines = ["# SurgiQ results", "", "## Accuracy by question type (%, zero-shot; the paper's Table 4)", ""]
    lines += ["| model | " + " | ".join(t4["columns"]) + " | Avg. |", "| --- |" + " --- |" * (len(t4["columns"]) + 1)]
    lines += ["| Random | " + " | ".join(_pct(t4["random"]) for _ in t4["columns"]) + f" | {_pct(t4['random'])} |"]
    for row in t4["rows"]:
        lines.append(
            f"| {row['model']} | " + " | ".join(_pct(row[c]) for c in t4["columns"]) + f" | {_pct(row['avg'])} |"
        )
    lines += ["", f"## Calibration (the paper's Table 5; ECE over {report['n_bins']} equal-width bins)", ""]
    lines += ["| model | accuracy (%) | ECE | Brier | gap |", "| --- | --- | --- | --- | --- |"]
    for row in report["table5_calibration"]:
        lines.append(
            f"| {row['model']} | {_pct(row['accuracy'])} | {_num(row['ece'])} | {_num(row['brier'])} | "
            f"{_num(row['gap'], '+.4f')} |"
        )
    lines += ["", "## Answer-order robustness (the paper's Table A3)", ""]
    if report["tableA3_shuffled"]:
        lines += ["| model | shots | questions | original (%) | shuffled (%) | Δ (pp) |", "| --- |" + " --- |" * 5]
        for row in report["tableA3_shuffled"]:
            lines.append(
                f"| {row['model']} | {row['shots']} | {row['n']} | {_pct(row['original'])} | "
                f"{_pct(row['shuffled'])} | {100 * row['delta']:+.2f} |"
            )
    else:
        lines.append("No model has both a `default` and a `shuffled` run.")
    t6 = report["table6_domains"]
    lines += ["", "## Accuracy per domain across models (the paper's Table 6)", ""]
    lines += ["| domain | models | mean (%) | std (%) |", "| --- | --- | --- | --- |"]
    lines += [f"| {d['domain']} | {d['models']} | {_pct(d['mean'])} | {_pct(d['std'])} |" for d in t6["domains"]]
    tests = t6["wilcoxon"] if any(t["models"] >= 2 for t in t6["wilcoxon"]) else []
    if not tests:
        lines += ["", "Wilcoxon signed-rank tests between domains need at least two models."]
    else:
        lines += ["", "Wilcoxon signed-rank tests between domains, paired by model (Holm-adjusted p last):", ""]
        lines += ["| domain A | domain B | models | W | p | p (Holm) |", "| --- | --- | --- | --- | --- | --- |"]
    for t in tests:
        p = _num(t["p"]) if t["p"] is not None else t["note"]
        lines.append(
            f"| {t['a']} | {t['b']} | {t['models']} | {_num(t['statistic'], '.1f')} | {p} | {_num(t.get('p_holm'))} |"
        )
    if report["fewshot"]:
        shots = sorted({k for row in report["fewshot"] for k in row["by_shots"]})
        lines += ["", "## Few-shot accuracy (%, the paper's Figure 6)", ""]
        lines += ["| model | " + " | ".join(f"{k}-shot" for k in shots) + " |", "| --- |" + " --- |" * len(shots)]
        for row in report["fewshot"]:
            lines.append(f"| {row['model']} | " + " | ".join(_pct(row["by_shots"].get(k)) for k in shots) + " |")
    return "\n".join(lines) + "\n"


def write_report(report: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "surgiq_tables.json").write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    (out / "surgiq_tables.md").write_text(report_markdown(report))
