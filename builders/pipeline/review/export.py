"""Export the review: the approved samples as the ``bench`` config (release schema, frames included when the
reviewed config has them), and the reports of the Sureon paper's Table 12 (per category: reviewed, approved, rejected,
rate), the rejection-reason breakdown, the manifest of every discarded sample with its notes and tags, and the
inter-rater agreement on the dual-reviewed subset.

Conservative policy (the Sureon paper, B.5.2): a sample is kept only when every reviewer assigned to it approved it;
any rejection rejects it (even before the other reviewer decides), otherwise any flag flags it. Samples still awaiting
a decision, or never assigned, are ``pending`` / ``unassigned`` and left out. Counts reconcile:
samples = approved + rejected + flagged + pending + unassigned, and the ``bench`` config holds exactly the approved.
"""

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from builders.card import STAT_FIELDS, plot_category_distribution, render_card, video_qa_stats
from builders.hub import configs_metadata, write_split
from builders.outputs import check_output_location, check_replaceable, staged_output
from builders.pipeline.review.reliability import agreement_report, rated_pairs
from builders.pipeline.review.samples import DEFAULT_CONFIG, load_config, with_decode
from builders.pipeline.review.store import REASON_TAGS, Assignment, Decision, ReviewStore
from builders.schema import FRAME_FEATURES, VIDEO_QA_FEATURES


STATUSES = ("approved", "rejected", "flagged", "pending", "unassigned")


@dataclass
class Verdict:
    sample_id: str
    status: str
    decisions: list[Decision] = field(default_factory=list)


def verdict(sample_id: str, reviewers: list[str], latest: dict[tuple[str, str], Decision]) -> Verdict:
    """The conservative verdict on one sample from its assigned reviewers' decisions in force."""
    if not reviewers:
        return Verdict(sample_id, "unassigned")
    decisions = [latest[r, sample_id] for r in sorted(reviewers) if (r, sample_id) in latest]
    kinds = {d.decision for d in decisions}
    if "reject" in kinds:
        status = "rejected"
    elif "flag" in kinds:
        status = "flagged"
    elif len(decisions) == len(reviewers):
        status = "approved"
    else:
        status = "pending"
    return Verdict(sample_id, status, decisions)


def verdicts(sample_ids: list[str], assignments: list[Assignment], latest) -> dict[str, Verdict]:
    reviewers = defaultdict(list)
    for a in assignments:
        reviewers[a.sample_id].append(a.reviewer)
    return {sample_id: verdict(sample_id, reviewers[sample_id], latest) for sample_id in sample_ids}


def category_table(records: dict[str, dict], results: dict[str, Verdict]) -> list[dict]:
    """The Sureon paper's Table 12: per category, reviewed (= decided), approved, rejected (incl. flagged) and approval
    rate."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for sample_id, result in results.items():
        counts[records[sample_id]["category"]][result.status] += 1
    rows = []
    for category in [*sorted(counts), "total"]:
        c = sum(counts.values(), Counter()) if category == "total" else counts[category]
        reviewed = c["approved"] + c["rejected"] + c["flagged"]
        rows.append(
            {
                "category": category,
                "reviewed": reviewed,
                "approved": c["approved"],
                "rejected": c["rejected"] + c["flagged"],
                "flagged": c["flagged"],
                "pending": c["pending"] + c["unassigned"],
                "approval_rate": c["approved"] / reviewed if reviewed else None,
            }
        )
    return rows


def reason_breakdown(results: dict[str, Verdict]) -> dict[str, int]:
    """Reason tags over the reject / flag decisions of discarded samples (``untagged`` when none was ticked)."""
    tags = Counter()
    for result in results.values():
        for d in result.decisions:
            if d.decision != "approve":
                tags.update(d.tags or ("untagged",))
    return {tag: tags[tag] for tag in [*REASON_TAGS, "untagged"] if tags[tag]}


def discarded_manifest(records: dict[str, dict], results: dict[str, Verdict]) -> list[dict]:
    return [
        {
            "question_id": sample_id,
            "category": records[sample_id]["category"],
            "status": result.status,
            "decisions": [
                {
                    "reviewer": d.reviewer,
                    "decision": d.decision,
                    "tags": list(d.tags),
                    "note": d.note,
                    "at": d.created_at,
                }
                for d in result.decisions
            ],
        }
        for sample_id, result in results.items()
        if result.status in ("rejected", "flagged")
    ]


def markdown_report(table: list[dict], reasons: dict[str, int], agreement: dict) -> str:
    lines = [
        "# Expert review",
        "",
        "| category | reviewed | approved | rejected | rate |",
        "|---|---:|---:|---:|---:|",
    ]
    for row in table:
        rate = "–" if row["approval_rate"] is None else f"{100 * row['approval_rate']:.1f}%"
        lines.append(f"| {row['category']} | {row['reviewed']} | {row['approved']} | {row['rejected']} | {rate} |")
    lines += ["", "## Rejection reasons", "", "| reason | count |", "|---|---:|"]
    lines += [f"| {REASON_TAGS.get(tag, tag)} | {count} |" for tag, count in reasons.items()]
    lines += ["", f"## Inter-rater agreement ({agreement['n_items']} dual-reviewed samples)", ""]
    lines += ["| labels | agreement | Cohen's kappa (95% CI) | Fleiss' kappa | Krippendorff's alpha |"]
    lines += ["|---|---:|---:|---:|---:|"]
    for name in ("decision", "retention"):
        a = agreement[name]
        ci = a["cohen_kappa_ci95"]
        kappa = "–" if a["cohen_kappa"] is None else f"{a['cohen_kappa']:.3f}"
        if ci:
            kappa += f" ({ci[0]:.3f}, {ci[1]:.3f})"
        cells = [
            "–" if a["percent_agreement"] is None else f"{100 * a['percent_agreement']:.1f}%",
            kappa,
            *("–" if a[k] is None else f"{a[k]:.3f}" for k in ("fleiss_kappa", "krippendorff_alpha")),
        ]
        lines.append(f"| {name} ({' / '.join(a['labels'])}) | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


@dataclass
class ExportReport:
    out: Path
    counts: dict[str, int]
    table: list[dict]

    def summary(self) -> str:
        counts = ", ".join(f"{status} {n}" for status, n in self.counts.items())
        return f"Exported {self.out}: {counts}\nbench (test) holds the {self.counts['approved']} approved samples"


def export_review(
    dataset_dir: Path, store: ReviewStore, out: Path, config: str = DEFAULT_CONFIG, overwrite: bool = False
) -> ExportReport:
    """Write ``out`` (Hub layout, ``bench`` config + card) with ``review_report.json`` / ``.md``; see the docstring.
    An ``out`` that may not be replaced is refused before the dataset is read."""
    inputs = {"--dataset": dataset_dir, "--db": store.path}
    check_output_location(out, inputs)
    check_replaceable(out, overwrite)
    dataset, _ = load_config(dataset_dir, config)
    stats_rows = dataset.select_columns(list(STAT_FIELDS))
    records = {r["question_id"]: r for r in stats_rows}
    results = verdicts(list(records), store.assignments(), store.latest())
    counts = Counter(result.status for result in results.values())
    counts = {status: counts[status] for status in STATUSES}
    if sum(counts.values()) != len(records):
        raise RuntimeError(f"verdicts {counts} do not add up to the {len(records)} samples of {config}")

    approved = [i for i, r in enumerate(stats_rows) if results[r["question_id"]].status == "approved"]
    kept = [records[stats_rows[i]["question_id"]] for i in approved]
    table = category_table(records, results)
    agreement = agreement_report(rated_pairs(store.assignments(), store.latest()))
    reasons = reason_breakdown(results)
    with staged_output(out, overwrite, inputs) as staging:
        features = with_decode(dataset.features, True)  # rows carry image bytes; the release decodes them
        written = write_split(iter(dataset.select(approved)), features, staging / "bench", "test")
        if written.num_examples != counts["approved"]:
            raise RuntimeError(f"wrote {written.num_examples} rows, expected the {counts['approved']} approved")
        stats = video_qa_stats(kept)
        with_frames = "frames" in dataset.features
        extra = [c for c in dataset.features if c not in VIDEO_QA_FEATURES and c not in FRAME_FEATURES]
        plot_category_distribution({"bench": stats}, staging / "assets" / "category_distribution.png")
        card_config = {"name": "bench", "split": "test", "description": "samples approved in expert review"}
        (staging / "README.md").write_text(
            render_card(
                [card_config | {"stats": stats}],
                configs_metadata({"bench": ["test"]}, default="bench"),
                {"bench": written.info(features)},
                with_frames,
                extra,
            )
        )
        report = {
            "source": {"dataset": str(dataset_dir), "config": config},
            "counts": counts,
            "per_category": table,
            "rejection_reasons": reasons,
            "agreement": agreement,
            "discarded": discarded_manifest(records, results),
            "pending": [s for s, r in results.items() if r.status in ("pending", "unassigned")],
        }
        (staging / "review_report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
        (staging / "review_report.md").write_text(markdown_report(table, reasons, agreement))
    return ExportReport(out, counts, table)
