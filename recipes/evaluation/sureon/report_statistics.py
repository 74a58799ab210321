"""Every number of the Sureon report (``sureon report sureon``) as plain JSON data: per model and mode the
accuracies with bootstrap and Wilson intervals, the multimodal gain, the pairwise McNemar tests, the random
baseline, and the intervals recomputed from stated accuracies (the Sureon paper's Table 14).

Apart from how the report shows them (:mod:`recipes.evaluation.sureon.report_rendering`): ``report.json`` holds
these numbers unrounded, and the benchmark (``benchmarks/report_sureon.py``) times their computation alone.
"""

import json
from pathlib import Path

from builders.errors import InputError
from recipes.evaluation.reporting import frames_labels, named_path
from recipes.evaluation.stats import CONFIDENCE, N_RESAMPLES, estimate_from_count, pairwise_mcnemar
from recipes.evaluation.sureon.metrics import (
    OVERALL,
    Prediction,
    item_table,
    random_baseline,
    read_predictions,
    score_model,
    subset_order,
)


HUMAN = "Human"
PAPER_TABLE14 = Path(__file__).parents[1] / "paper_results" / "sureon_paper_table14.json"
PAPER_TABLE3 = Path(__file__).parents[1] / "paper_results" / "sureon_paper_table3.json"
PAPER_EVALS = ("chance", "visual", "blind", "MG")


def load_paper_table3(path: str | Path = PAPER_TABLE3) -> dict:
    """The Sureon paper's printed Table 3 rows (JSON: ``columns``, ``judged_columns``, ``rows`` of model, group, eval,
    mu, mu_ci_half and one value per column); a malformed file is an error naming it."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        columns = list(data["columns"]) + list(data["judged_columns"])
        rows = data["rows"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise InputError(f"{path}: expected JSON with columns, judged_columns and rows ({err})") from None
    for number, row in enumerate(rows, start=1):
        missing = [key for key in ("model", "eval", "mu", *columns) if key not in row]
        if missing or row["eval"] not in PAPER_EVALS:
            raise InputError(f"{path}: row {number} needs model, eval ({', '.join(PAPER_EVALS)}), mu and {columns}")
    return data


def load_models(specs: list[str], human: str | None = None) -> tuple[dict[str, list[Prediction]], str | None]:
    """Predictions per model name, the human baseline first; returns ``(models, human name or None)``."""
    models: dict[str, list[Prediction]] = {}
    sources: dict[str, Path] = {}
    entries = ([(human, True)] if human else []) + [(spec, False) for spec in specs]
    human_name = None
    for spec, is_human in entries:
        name, path = named_path(spec)
        if is_human:
            name = human_name = name or HUMAN
        for model, predictions in read_predictions(path, name).items():
            if model in models:
                raise InputError(f"model {model!r} is in both {sources[model]} and {path}: rename one (NAME=PATH)")
            models[model], sources[model] = predictions, path
    return models, human_name


def build_report(
    models: dict[str, list[Prediction]],
    human: str | None = None,
    n_resamples: int = N_RESAMPLES,
    exact_below: int | None = None,
    alpha: float = 0.05,
    paper: dict | None = None,
    runs: dict[str, dict] | None = None,
) -> dict:
    """Every number of the report as plain JSON data (percentages, unrounded); ``paper``: the Sureon paper's printed
    Table 3 (:func:`load_paper_table3`) to show beside ours; ``runs``: each model's recorded settings."""
    if not models:
        raise InputError("no prediction files given")
    items = item_table(p for predictions in models.values() for p in predictions)
    results = [score_model(name, predictions, n_resamples) for name, predictions in models.items()]
    scored = [p for p in items.values() if p.scored_by == "accuracy"]
    judged = [p for p in items.values() if p.scored_by == "judge"]
    paired = {r.name: r.modes["visual"].outcomes for r in results if "visual" in r.modes}
    paired = {name: outcomes for name, outcomes in paired.items() if outcomes}
    pairwise = pairwise_mcnemar(paired, alpha=alpha, exact_below=exact_below) if len(paired) > 1 else []
    runs = {name: settings for name, settings in (runs or {}).items() if name in models}
    frames = frames_labels(runs)
    return {
        "benchmark": "sureon",
        "protocol": {
            "confidence": CONFIDENCE,
            "bootstrap": f"percentile, {n_resamples} resamples over items, seeded from the subset and its item ids",
            "mcnemar": "exact binomial for every pair"
            if exact_below is None
            else f"exact binomial below {exact_below} discordant items, chi-square with continuity correction above",
            "multiple_comparisons": f"Holm-Bonferroni across all {len(pairwise)} pairs, alpha {alpha}",
            "mcnemar_mode": "visual",
        },
        "columns": subset_order(p.category for p in scored),
        "judged_columns": subset_order(p.category for p in judged),
        "items": _item_counts(scored),
        "judged_items": _item_counts(judged, groups=False),
        "random": random_baseline(items),
        "human": human,
        "models": [
            {
                "name": r.name,
                "modes": {
                    mode: {
                        "records": m.records,
                        "unparsed": m.unparsed,
                        "estimates": {subset: e.as_dict() for subset, e in m.estimates.items()},
                        "judged": {category: e.as_dict() for category, e in m.judged.items()},
                        "unjudged": m.unjudged,
                    }
                    for mode, m in r.modes.items()
                },
                "multimodal_gain": r.gain,
                # what its run's summary.json found: trained on the rows scored (the tables mark the model)
                "contamination": (runs.get(r.name) or {}).get("contamination") or [],
                # how its clips were shown, where the report's runs differ in it (video / images; None where they
                # agree): the tables say it beside the name
                "frames_as": frames.get(r.name),
            }
            for r in results
        ],
        "pairwise": [row.as_dict() for row in pairwise],
        "paper_table3": paper,
        "runs": runs,
    }


def _item_counts(predictions: list[Prediction], groups: bool = True) -> dict[str, int]:
    counts = {OVERALL: len(predictions)} if predictions else {}
    for p in predictions:
        for subset in [p.category] + ([p.group] if groups and p.group else []):
            counts[subset] = counts.get(subset, 0) + 1
    return counts


def accuracies_report(path: str | Path, n_resamples: int = N_RESAMPLES) -> dict:
    """Intervals recomputed from stated ``(model, n, accuracy)`` rows, beside the printed intervals if given.

    The count correct is the integer nearest ``accuracy * n / 100``; a stated accuracy that no count reproduces
    at one decimal is flagged (the Sureon paper prints 15.0 for Molmo2, but 45/299 = 15.05 and 44/299 = 14.72).
    """
    path = Path(path)
    try:
        stated = json.loads(path.read_text(encoding="utf-8"))
        rows_in = stated["rows"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise InputError(f"{path}: expected JSON with a 'rows' list of {{model, n, accuracy}} ({err})") from None
    rows = []
    for number, row in enumerate(rows_in, start=1):
        try:
            model, n, stated_accuracy = str(row["model"]), int(row["n"]), float(row["accuracy"])
        except (KeyError, TypeError, ValueError) as err:
            raise InputError(f"{path}: row {number} needs model, n and accuracy ({err!r})") from None
        correct = round(stated_accuracy * n / 100)
        e = estimate_from_count(correct, n, "stated", model, n_resamples=n_resamples)
        printed = row.get("bootstrap_ci")
        entry = {"model": model, "stated_accuracy": stated_accuracy, **e.as_dict()}
        entry["count_reproduces_stated"] = round(e.accuracy, 1) == stated_accuracy
        if printed is not None:
            entry["printed_bootstrap_ci"] = [float(printed[0]), float(printed[1])]
            entry["wilson_vs_printed"] = max(abs(w - p) for w, p in zip(e.wilson, printed, strict=True))
            entry["bootstrap_vs_printed"] = max(abs(b - p) for b, p in zip(e.bootstrap, printed, strict=True))
        rows.append(entry)
    return {"source": stated.get("source", str(path)), "rows": rows}
