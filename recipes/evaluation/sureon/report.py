"""Leaderboard report of the Sureon benchmark from any number of models' prediction files (the Sureon paper, Tables 3,
14-18).

    sureon report sureon runs/qwen/predictions.jsonl "Sureon-VLM=runs/ours/predictions.jsonl" \
        --human human_baseline.jsonl --out reports/sureon

A file may hold several models (named by its ``model`` field) or be named on the command line (``NAME=PATH``).
VLMEvalKit's prediction tables of the datasets ``sureon export vlmevalkit`` writes (``MODEL/MODEL_Sureon.xlsx`` or
``.tsv``) are read as well: each row's output is parsed and scored as ``sureon eval sureon`` scores it
(``recipes/evaluation/prediction_tables.py``), the model named after the file unless ``NAME=PATH`` says otherwise.
The human baseline is a prediction file too (visual mode, no sequence summaries). The report folder holds
``report.md`` (the Table 3 layout, confidence-interval tables in the style of Tables 14-17, the pairwise McNemar
table in the style of Table 18, sequence summaries, unparseable answers, the runs' settings), ``report.json`` (every
number, unrounded) and ``accuracy.png`` / ``multimodal_gain.png``.

Table 3 shows the Sureon paper's printed rows (``--paper``, default ``paper_results/sureon_paper_table3.json``;
``--no-paper`` leaves them out) beside ours, a "numbers from" column telling them apart: the paper's Random and Human
rows first, then each paper model followed by the runs of its preset (a ``summary.json`` next to a predictions file
names the preset and the paper row it reproduces, as ``sureon eval sureon --preset`` writes it), then the other runs.
The paper's numbers are shown as printed (MG included), ours are computed from the predictions.

    sureon report sureon --accuracies recipes/evaluation/paper_results/sureon_paper_table14.json --out reports/table14

renders a Table 14 from stated accuracies alone (a 0/1 bootstrap depends only on the count correct), next to the
printed intervals: the consistency check of our interval code against the Sureon paper's.
"""

import argparse
import json
from pathlib import Path

from builders.arguments import float_range, non_negative_int, positive_int
from builders.errors import InputError
from builders.plots import pyplot, save_figure
from builders.sureon.categories import BY_CODE
from recipes.evaluation.reporting import (
    interval,
    load_run_settings,
    markdown_table,
    named_path,
    pct,
    pvalue,
    runs_table,
    signed,
    write_report,
)
from recipes.evaluation.stats import CONFIDENCE, N_RESAMPLES, estimate_from_count, pairwise_mcnemar
from recipes.evaluation.sureon.metrics import (
    GROUPS,
    MODES,
    OVERALL,
    PERCEPTION,
    REASONING,
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
            }
            for r in results
        ],
        "pairwise": [row.as_dict() for row in pairwise],
        "paper_table3": paper,
        "runs": {name: settings for name, settings in (runs or {}).items() if name in models},
    }


def _item_counts(predictions: list[Prediction], groups: bool = True) -> dict[str, int]:
    counts = {OVERALL: len(predictions)} if predictions else {}
    for p in predictions:
        for subset in [p.category] + ([p.group] if groups and p.group else []):
            counts[subset] = counts.get(subset, 0) + 1
    return counts


# ---- markdown ------------------------------------------------------------------------------------------------


def _cell(mode: dict | None, subset: str, judged: bool = False) -> str:
    if mode is None:
        return "—"
    found = mode["judged" if judged else "estimates"].get(subset)
    return pct(found["accuracy"]) if found else "—"


def _mu(mode: dict | None) -> str:
    found = mode and mode["estimates"].get(OVERALL)
    if not found:
        return "—"
    half = (found["bootstrap_ci"][1] - found["bootstrap_ci"][0]) / 2
    return f"{found['accuracy']:.1f} ±{half:.1f}"


def _our_rows(model: dict, columns: list[str], judged: list[str]) -> list[list[str]]:
    """One model's visual / blind / MG rows (label on the first)."""
    rows, label = [], model["name"]
    for mode in MODES:
        found = model["modes"].get(mode)
        if found is None:
            continue
        cells = [_cell(found, c) for c in columns] + [_cell(found, c, judged=True) for c in judged]
        rows.append([label, mode, _mu(found)] + cells)
        label = ""
    gain = model["multimodal_gain"]
    if gain:
        cells = [signed(gain.get(c)) for c in columns + judged]
        rows.append([label, "MG", signed(gain.get(OVERALL))] + cells)
    return rows


def _paper_rows(paper: dict, model: str, columns: list[str]) -> list[list[str]]:
    """The printed rows of one paper model, as printed (a value the paper lacks, or a column it has not, is —)."""
    rows, label = [], model
    for row in (r for r in paper["rows"] if r["model"] == model):
        if row["eval"] == "MG":
            cells = [signed(row.get(c)) for c in columns]
            mu = signed(row["mu"])
        else:
            cells = [pct(row.get(c)) for c in columns]
            mu = pct(row["mu"]) + (f" ±{row['mu_ci_half']:.1f}" if row.get("mu_ci_half") is not None else "")
        rows.append([label, "" if row["eval"] == "chance" else row["eval"], mu] + cells)
        label = ""
    return rows


def _with_origin(rows: list[list[str]], origin: str) -> list[list[str]]:
    return [row[:2] + [origin] + row[2:] for row in rows]


def table3(data: dict) -> str:
    """Models × categories with visual / blind / MG rows; μ carries ± half the bootstrap interval. With the paper's
    rows: its Random and Human rows, then each paper model followed by the runs of its preset, then the others."""
    paper = data.get("paper_table3")
    columns, judged = data["columns"], data["judged_columns"]
    if paper:
        columns = subset_order(columns + paper["columns"])
        judged = subset_order(judged + paper["judged_columns"])
    header = (
        ["Model", "Eval"] + (["numbers from"] if paper else []) + ["μ"] + columns + [f"{c} (llmj)" for c in judged]
    )
    random = data["random"]
    ours_random = [["Random", "", pct(random.get(OVERALL))] + [pct(random.get(c)) for c in columns]]
    ours_random[0] += ["—"] * len(judged)
    if not paper:
        rows = ours_random
        for model in data["models"]:
            rows += _our_rows(model, columns, judged)
    else:
        ours = {model["name"]: model for model in data["models"]}
        placed: set[str] = set()
        rows = _with_origin(_paper_rows(paper, "Random", columns + judged), "paper")
        rows += _with_origin(ours_random, "ours") if random else []
        paper_models = list(dict.fromkeys(r["model"] for r in paper["rows"] if r["model"] != "Random"))
        for paper_model in paper_models:
            rows += _with_origin(_paper_rows(paper, paper_model, columns + judged), "paper")
            linked = [name for name, run in data["runs"].items() if run.get("paper_row") == paper_model]
            if paper_model == HUMAN and data["human"]:
                linked = [data["human"], *linked]
            for name in linked:
                if name in ours and name not in placed:
                    rows += _with_origin(_our_rows(ours[name], columns, judged), "ours")
                    placed.add(name)
        for name, model in ours.items():
            if name not in placed:
                rows += _with_origin(_our_rows(model, columns, judged), "ours")
    groups = "; ".join(
        f"{group}: {', '.join(c for c in columns if BY_CODE.get(c) and BY_CODE[c].group == group)}" for group in GROUPS
    )
    note = (
        f"μ: pooled accuracy over the {data['items'].get(OVERALL, 0)} accuracy-scored items (± half the bootstrap "
        f"95% interval); MG = S_visual − S_blind in points; llmj: judged by an LLM, not in μ. {groups}."
    )
    if paper:
        note += f" Paper rows: {paper['source']} {paper.get('note', '')}".rstrip()
    return markdown_table(header, rows) + "\n\n" + note


def _ranked(data: dict, mode: str) -> list[dict]:
    """Models with this mode, by overall accuracy, best first (the order of Tables 14-17)."""
    present = [m for m in data["models"] if m["modes"].get(mode, {}).get("estimates", {}).get(OVERALL)]
    return sorted(present, key=lambda m: -m["modes"][mode]["estimates"][OVERALL]["accuracy"])


def _with_ci(estimate: dict | None) -> str:
    return "—" if estimate is None else f"{estimate['accuracy']:.1f} {interval(estimate['bootstrap_ci'])}"


def ci_tables(data: dict, mode: str) -> str:
    ranked = _ranked(data, mode)
    if not ranked:
        return ""
    items = data["items"]
    overall_rows = []
    for model in ranked:
        e = model["modes"][mode]["estimates"][OVERALL]
        overall_rows.append(
            [model["name"], str(e["n"]), pct(e["accuracy"]), interval(e["bootstrap_ci"]), interval(e["wilson_ci"])]
        )
    parts = [
        f"### Overall accuracy ({mode}; Table 14 style)",
        markdown_table(["Model", "n", "Accuracy (%)", "Bootstrap 95% CI (%)", "Wilson 95% CI (%)"], overall_rows),
    ]
    groups = [g for g in (PERCEPTION, REASONING) if g in items]
    if groups:
        rows = [[m["name"]] + [_with_ci(m["modes"][mode]["estimates"].get(g)) for g in groups] for m in ranked]
        header = ["Model"] + [f"{g.capitalize()} (n={items[g]})" for g in groups]
        parts += [f"### Perception and reasoning ({mode}; Table 15 style)", markdown_table(header, rows)]
    by_group = {
        "Perception categories": [c for c in data["columns"] if _group(c) == PERCEPTION],
        "Reasoning categories, accuracy-scored": [c for c in data["columns"] if _group(c) == REASONING],
        "Other categories": [c for c in data["columns"] if _group(c) is None],
    }
    styles = {"Perception categories": "; Table 16 style", "Reasoning categories, accuracy-scored": "; Table 17 style"}
    for title, columns in by_group.items():
        if not columns:
            continue
        rows = [[m["name"]] + [_with_ci(m["modes"][mode]["estimates"].get(c)) for c in columns] for m in ranked]
        header = ["Model"] + [f"{c} (n={items[c]})" for c in columns]
        parts += [f"### {title} ({mode}{styles.get(title, '')})", markdown_table(header, rows)]
    return "\n\n".join(parts)


def _group(code: str) -> str | None:
    return BY_CODE[code].group if code in BY_CODE else None


def judged_table(data: dict) -> str:
    rows = []
    for model in data["models"]:
        for mode, found in model["modes"].items():
            for category in data["judged_columns"]:
                e = found["judged"].get(category)
                unjudged = found["unjudged"].get(category, 0)
                if e is None and not unjudged:
                    continue
                rows.append(
                    [
                        model["name"],
                        mode,
                        category,
                        str(e["n"] if e else 0),
                        str(unjudged),
                        pct(e and e["accuracy"]),
                        interval(e and e["bootstrap_ci"]),
                        interval(e and e["wilson_ci"]),
                    ]
                )
    header = ["Model", "Eval", "Category", "judged", "not judged", "Accuracy (%)", "Bootstrap 95% CI", "Wilson 95% CI"]
    return markdown_table(header, rows) if rows else ""


def pairwise_table(data: dict) -> str:
    rows = [
        [
            row["model_a"],
            row["model_b"],
            f"{row['delta_points']:.2f}",
            str(row["n_paired"]),
            f"{row['only_a_correct']} / {row['only_b_correct']}",
            row["method"],
            pvalue(row["p_raw"]),
            pvalue(row["p_holm"]) + ("*" if row["significant"] else ""),
        ]
        for row in data["pairwise"]
    ]
    header = ["Model A", "Model B", "Δ Acc. (pts)", "n", "only A / only B", "test", "p (raw)", "p (Holm)"]
    return markdown_table(header, rows)


def unparsed_table(data: dict) -> str:
    rows = [
        [model["name"], mode, str(found["records"]), str(found["unparsed"])]
        for model in data["models"]
        for mode, found in model["modes"].items()
    ]
    return markdown_table(["Model", "Eval", "records", "unparseable (counted wrong)"], rows)


def render_markdown(data: dict) -> str:
    protocol = data["protocol"]
    parts = [
        "# Sureon benchmark report",
        (
            f"{len(data['models'])} model(s); {data['items'].get(OVERALL, 0)} accuracy-scored items, "
            f"{data['judged_items'].get(OVERALL, 0)} judged items. Intervals: {protocol['confidence']:.0%}, "
            f"bootstrap {protocol['bootstrap']}; Wilson score interval beside it."
        ),
        "## Results (Table 3 layout)",
        table3(data),
    ]
    for mode in MODES:
        tables = ci_tables(data, mode)
        if tables:
            parts += [f"## Confidence intervals, {mode}", tables]
    judged = judged_table(data)
    if judged:
        parts += ["## Judged answers (sequence summarization; not in μ)", judged]
    if data["pairwise"]:
        parts += [
            "## Pairwise comparisons (Table 18 style)",
            (
                f"McNemar's test on paired {protocol['mcnemar_mode']} predictions ({protocol['mcnemar']}); "
                f"{protocol['multiple_comparisons']}; * marks significance after correction. Δ = accuracy of A "
                "minus B on the items both answered."
            ),
            pairwise_table(data),
        ]
    parts += ["## Unparseable answers", unparsed_table(data)]
    if data.get("runs"):
        parts += ["## Runs (from each run's summary.json)", runs_table(data["runs"])]
    return "\n\n".join(parts) + "\n"


# ---- plots ---------------------------------------------------------------------------------------------------


def plot_accuracy(data: dict, path: Path) -> None:
    """μ per model and mode with bootstrap 95% intervals; the random baseline dashed."""
    plt = pyplot()
    models = data["models"]
    fig, ax = plt.subplots(figsize=(7, 0.5 * len(models) + 1.5), dpi=100)
    height = 0.38
    for offset, mode in enumerate(MODES):
        ys, values, errors = [], [], [[], []]
        for y, model in enumerate(models):
            e = model["modes"].get(mode, {}).get("estimates", {}).get(OVERALL)
            if e is None:
                continue
            ys.append(y + offset * height)
            values.append(e["accuracy"])
            errors[0].append(e["accuracy"] - e["bootstrap_ci"][0])
            errors[1].append(e["bootstrap_ci"][1] - e["accuracy"])
        if ys:
            ax.barh(ys, values, height=height, xerr=errors, capsize=3, label=mode)
    if OVERALL in data["random"]:
        ax.axvline(data["random"][OVERALL], color="grey", linestyle="--", label="random")
    ax.set_yticks([y + height / 2 for y in range(len(models))], [m["name"] for m in models])
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("μ, accuracy (%) with bootstrap 95% CI")
    ax.legend(fontsize=8, loc="lower right")
    save_figure(fig, path)


def plot_gain(data: dict, path: Path) -> None:
    """Multimodal gain per category (and μ), one bar per model."""
    plt = pyplot()
    models = [m for m in data["models"] if m["multimodal_gain"]]
    subsets = [OVERALL] + data["columns"] + data["judged_columns"]
    fig, ax = plt.subplots(figsize=(max(7, 0.7 * len(subsets) + 2), 4), dpi=100)
    width = 0.8 / len(models)
    for i, model in enumerate(models):
        gains = [model["multimodal_gain"].get(s, 0.0) for s in subsets]
        ax.bar([x + i * width for x in range(len(subsets))], gains, width=width, label=model["name"])
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(subsets))], ["μ" if s == OVERALL else s for s in subsets])
    ax.set_ylabel("MG = S_visual − S_blind (points)")
    ax.legend(fontsize=8)
    save_figure(fig, path)


# ---- stated accuracies (the Sureon paper's Table 14)
# -------------------------------------------------------------------


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


def render_accuracies(data: dict) -> str:
    has_printed = any("printed_bootstrap_ci" in row for row in data["rows"])
    header = ["Model", "n", "correct", "Accuracy (%)"]
    header += ["Printed bootstrap 95% CI"] if has_printed else []
    header += ["Our bootstrap 95% CI", "Wilson 95% CI"]
    header += ["Wilson Δ (pts)", "ours Δ (pts)"] if has_printed else []
    rows = []
    for row in data["rows"]:
        accuracy = pct(row["accuracy"]) + (
            "" if row["count_reproduces_stated"] else f" (stated {row['stated_accuracy']})"
        )
        cells = [row["model"], str(row["n"]), str(row["correct"]), accuracy]
        cells += [interval(row.get("printed_bootstrap_ci"))] if has_printed else []
        cells += [interval(row["bootstrap_ci"]), interval(row["wilson_ci"])]
        if has_printed:
            cells += [f"{row.get('wilson_vs_printed', float('nan')):.2f}", f"{row.get('bootstrap_vs_printed', 0):.2f}"]
        rows.append(cells)
    parts = ["# Accuracy intervals from stated accuracies", f"Source: {data['source']}", markdown_table(header, rows)]
    if has_printed:
        parts.append("Δ: the larger distance between an interval's endpoints and the printed bootstrap endpoints.")
    gaps = [row["wilson_vs_printed"] for row in data["rows"] if "wilson_vs_printed" in row]
    if gaps:
        parts.append(
            f"Wilson vs printed bootstrap endpoints: mean {sum(gaps) / len(gaps):.2f}, max {max(gaps):.2f} points."
        )
    return "\n\n".join(parts) + "\n"


# ---- command line --------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("predictions", nargs="*", metavar="PRED", help="predictions.jsonl, or NAME=predictions.jsonl")
    parser.add_argument("--out", required=True, type=Path, help="report folder")
    parser.add_argument("--human", metavar="PRED", help="human baseline predictions (named 'Human' unless NAME=)")
    parser.add_argument(
        "--accuracies", type=Path, help="render a Table 14 from stated accuracies (JSON rows of model, n, accuracy)"
    )
    parser.add_argument("--resamples", type=positive_int, default=N_RESAMPLES, help="bootstrap resamples over items")
    parser.add_argument(
        "--mcnemar-exact-below",
        type=non_negative_int,
        metavar="N",
        help="chi-square McNemar once a pair has N or more discordant items (default: exact for every pair)",
    )
    parser.add_argument(
        "--alpha",
        type=float_range(0.0, 1.0, low_open=True),
        default=0.05,
        help="family-wise level of the Holm correction",
    )
    parser.add_argument(
        "--paper", type=Path, default=PAPER_TABLE3, help="the Sureon paper's Table 3 rows (JSON) printed beside ours"
    )
    parser.add_argument("--no-paper", action="store_true", help="print our rows only")
    parser.add_argument("--overwrite", action="store_true", help="replace OUT if it exists")


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return parser


def main(args: argparse.Namespace) -> Path:
    if bool(args.predictions or args.human) == bool(args.accuracies):
        raise InputError("give prediction files (and/or --human) or --accuracies, not both and not neither")
    if args.accuracies:
        data = accuracies_report(args.accuracies, args.resamples)
        return write_report(args.out, render_accuracies(data), data, args.overwrite)
    models, human = load_models(args.predictions, args.human)
    paper = None if getattr(args, "no_paper", False) else load_paper_table3(args.paper)
    runs = load_run_settings(args.predictions)
    data = build_report(models, human, args.resamples, args.mcnemar_exact_below, args.alpha, paper, runs)
    plots = [("accuracy.png", lambda path: plot_accuracy(data, path))]
    if any(model["multimodal_gain"] for model in data["models"]):
        plots.append(("multimodal_gain.png", lambda path: plot_gain(data, path)))
    return write_report(args.out, render_markdown(data), data, args.overwrite, plots)


def run(args: argparse.Namespace) -> int:
    out = main(args)
    if not args.accuracies:
        data = json.loads((out / "report.json").read_text(encoding="utf-8"))
        print("## Results (Table 3 layout)\n\n" + table3(data))
    print(f"Wrote {out / 'report.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run(make_parser().parse_args()))
