"""How the Sureon report shows its numbers: the Table 3 layout (the Sureon paper's printed rows beside ours), the
confidence-interval tables in the style of Tables 14-17, the pairwise McNemar table in the style of Table 18, the
judged and unparseable answers, the intervals from stated accuracies, and the plots.

It reads only the JSON data :mod:`recipes.evaluation.sureon.report_statistics` computes (what ``report.json``
holds), so a layout changes here without touching a number.
"""

from pathlib import Path

from builders.plots import pyplot, save_figure
from builders.sureon.categories import BY_CODE
from recipes.evaluation.reporting import (
    contamination_section,
    interval,
    markdown_table,
    marked,
    pct,
    pvalue,
    runs_table,
    signed,
)
from recipes.evaluation.sureon.metrics import GROUPS, MODES, OVERALL, PERCEPTION, REASONING, subset_order
from recipes.evaluation.sureon.report_statistics import HUMAN


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


def _name(model: dict) -> str:
    """The model's name in the tables, with how its clips were shown where the report mixes video and images, and
    marked when its run found it trained on the rows scored."""
    return marked(model["name"], bool(model.get("contamination")), model.get("frames_as"))


def _our_rows(model: dict, columns: list[str], judged: list[str]) -> list[list[str]]:
    """One model's visual / blind / MG rows (label on the first)."""
    rows, label = [], _name(model)
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
            [_name(model), str(e["n"]), pct(e["accuracy"]), interval(e["bootstrap_ci"]), interval(e["wilson_ci"])]
        )
    parts = [
        f"### Overall accuracy ({mode}; Table 14 style)",
        markdown_table(["Model", "n", "Accuracy (%)", "Bootstrap 95% CI (%)", "Wilson 95% CI (%)"], overall_rows),
    ]
    groups = [g for g in (PERCEPTION, REASONING) if g in items]
    if groups:
        rows = [[_name(m)] + [_with_ci(m["modes"][mode]["estimates"].get(g)) for g in groups] for m in ranked]
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
        rows = [[_name(m)] + [_with_ci(m["modes"][mode]["estimates"].get(c)) for c in columns] for m in ranked]
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
    parts += contamination_section(data.get("runs") or {})
    if data.get("runs"):
        parts += ["## Runs (from each run's summary.json)", runs_table(data["runs"])]
    return "\n\n".join(parts) + "\n"


def headline(data: dict) -> str:
    """One line per model: overall accuracy with and without the visuals and the multimodal gain (MG = S_v - S_wv,
    the Sureon paper's Table 3), what ``make demo`` ends with."""
    lines = []
    for model in data["models"]:
        overall = {mode: run["estimates"]["overall"]["accuracy"] for mode, run in model["modes"].items()}
        parts = [f"{mode} {overall[mode]:.1f} %" for mode in ("visual", "blind") if mode in overall]
        gain = (model.get("multimodal_gain") or {}).get("overall")
        parts += [f"MG {gain:+.1f} points"] if gain is not None else []
        lines.append(f"{_name(model)}: " + ", ".join(parts))
    chance = data.get("random", {}).get("overall")
    if chance is not None:
        lines.append(f"chance: {chance:.1f} %")
    return "\n".join(lines)


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
