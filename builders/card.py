"""Statistics of a built video-QA dataset (the Sureon paper's Table 2) and the dataset card rendered from them."""

import statistics
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from builders.options import LETTERS
from builders.plots import pyplot, save_figure
from builders.sureon.categories import BY_CODE, CATEGORIES, MCQ
from model_cards import SUREON_CITATION, template_path


if TYPE_CHECKING:  # datasets and huggingface_hub are imported where a card is rendered
    from datasets import DatasetInfo, Features
    from huggingface_hub import DatasetCardData


STAT_ROWS = (
    ("samples", "Samples (QAs)"),
    ("categories", "Question categories"),
    ("short_long_categories", "short-window / long-horizon categories"),
    ("mcq_open_categories", "MCQ / open-ended categories"),
    ("accuracy_scored", "Accuracy-scored questions (MCQ + ordering)"),
    ("open_ended", "Open-ended questions (LLM-judged)"),
    ("specialties", "Surgical specialties"),
    ("subjects", "Subjects"),
    ("procedure_types", "Procedure types"),
    ("unique_clips", "Unique clips (temporal windows)"),
    ("source_videos", "Source narrated videos"),
    ("median_clip_seconds_short", "Median clip duration, short-window (s)"),
    ("median_clip_seconds_long", "Median clip duration, long-horizon (s)"),
    ("passes_blind_curation", "passes_blind_curation true / false / null"),
)


STAT_FIELDS = (
    "question_id",
    "clip_id",
    "source_id",
    "start",
    "end",
    "category",
    "answer_format",
    "answer_index",
    "passes_blind_curation",
    "specialty",
    "subject",
    "procedure",
)


def _distinct(records: list[dict], key: str) -> int:
    return len({r[key] for r in records if r[key]})


def _median(values: list[float]) -> float | str:
    return round(statistics.median(values), 1) if values else "-"


def video_qa_stats(records: list[dict]) -> dict:
    """Table-2-style statistics of a list of records (clip durations are per unique clip); only
    :data:`STAT_FIELDS` are read, so callers can keep just those while streaming frames to disk."""
    known = [BY_CODE[r["category"]] for r in records if r["category"] in BY_CODE]
    clip_seconds: dict[str, dict[str, float]] = {"short-window": {}, "long-horizon": {}}
    for record in records:
        category = BY_CODE.get(record["category"])
        if category is not None:
            clip_seconds[category.granularity][record["clip_id"]] = record["end"] - record["start"]
    flags = [r["passes_blind_curation"] for r in records]
    positions: dict[str, int] = {}
    for record in records:
        if record["answer_format"] == MCQ and record["answer_index"] >= 0:
            letter = LETTERS[record["answer_index"]]
            positions[letter] = positions.get(letter, 0) + 1
    per_category: dict[str, int] = {}
    for record in records:
        per_category[record["category"]] = per_category.get(record["category"], 0) + 1
    short = {c.code for c in known if c.granularity == "short-window"}
    mcq = {c.code for c in known if c.answer_format == MCQ}
    return {
        "samples": len(records),
        "categories": len(per_category),
        "short_long_categories": f"{len(short)} / {len({c.code for c in known}) - len(short)}",
        "mcq_open_categories": f"{len(mcq)} / {len({c.code for c in known}) - len(mcq)}",
        "accuracy_scored": sum(c.accuracy_scored for c in known),
        "open_ended": sum(not c.accuracy_scored for c in known),
        "specialties": _distinct(records, "specialty"),
        "subjects": _distinct(records, "subject"),
        "procedure_types": _distinct(records, "procedure"),
        "unique_clips": _distinct(records, "clip_id"),
        "source_videos": _distinct(records, "source_id"),
        "median_clip_seconds_short": _median(list(clip_seconds["short-window"].values())),
        "median_clip_seconds_long": _median(list(clip_seconds["long-horizon"].values())),
        "passes_blind_curation": f"{flags.count(True)} / {flags.count(False)} / {flags.count(None)}",
        "per_category": dict(sorted(per_category.items())),
        "answer_position": dict(sorted(positions.items())),
    }


def plot_category_distribution(config_stats: dict[str, dict], path: Path) -> None:
    """Horizontal bars of samples per category, one bar per config (log scale once counts span orders of magnitude,
    as bench's 340 next to db's 76K do)."""
    plt = pyplot()

    codes = [c.code for c in CATEGORIES]
    codes += sorted({k for s in config_stats.values() for k in s["per_category"]} - set(codes))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(codes) + 1.2), dpi=100)
    height = 0.8 / max(1, len(config_stats))
    for i, (config, stats) in enumerate(config_stats.items()):
        counts = [stats["per_category"].get(code, 0) for code in codes]
        ax.barh([y + i * height for y in range(len(codes))], counts, height=height, label=config)
    ax.set_yticks([y + 0.4 - height / 2 for y in range(len(codes))], codes)
    ax.invert_yaxis()
    largest = max((n for stats in config_stats.values() for n in stats["per_category"].values()), default=1)
    if largest > 100:
        ax.set_xscale("log")
        ax.set_xlim(left=0.5)
    ax.set_xlabel("samples")
    ax.legend(fontsize=8)
    save_figure(fig, path)


def render_card(
    configs: list[dict],
    config_metadata: list[dict],
    dataset_infos: dict[str, "DatasetInfo"],
    with_frames: bool,
    extra_columns: list[str],
    blur: dict | None = None,
    repo_id: str = "ORG/sureon",
    pretty_name: str = "Sureon",
    frames_as_files: list[str] | None = None,
) -> str:
    """Render the dataset card. ``configs``: ``[{name, split, description, stats}]`` in display order."""
    card_data = _card_data(
        pretty_name,
        "sureon-release-terms",
        ["visual-question-answering", "video-text-to-text"],
        ["surgical-video", "sureon", "video-question-answering", "medical"],
        max((c["stats"]["samples"] for c in configs), default=0),
        config_metadata,
        dataset_infos,
    )
    seen = {code for c in configs for code in c["stats"]["per_category"]}
    category_rows = [
        {"code": c.code, "name": c.name, "granularity": c.granularity, "group": c.group, "format": c.answer_format}
        for c in CATEGORIES
    ] + [
        {"code": code, "name": code, "granularity": "-", "group": "-", "format": "-"}
        for code in sorted(seen - set(BY_CODE))
    ]
    letters = sorted({letter for c in configs for letter in c["stats"]["answer_position"]})
    from huggingface_hub import DatasetCard

    card = DatasetCard.from_template(
        card_data,
        template_path=template_path("sureon_dataset_card.md"),
        pretty_name=pretty_name,
        configs=configs,
        stat_rows=STAT_ROWS,
        category_rows=category_rows,
        answer_letters=letters,
        with_frames=with_frames,
        frames_as_files=frames_as_files or [],
        extra_columns=extra_columns,
        blur=blur,
        repo_id=repo_id,
        citation=SUREON_CITATION,
    )
    return str(card)


def _card_data(
    pretty_name: str,
    license_name: str,
    task_categories: list[str],
    tags: list[str],
    largest: int,
    config_metadata: list[dict],
    dataset_infos: dict[str, "DatasetInfo"],
) -> "DatasetCardData":
    """The card's YAML header: metadata, the ``configs:`` shards and ``dataset_info`` (features and split sizes)."""
    from datasets.info import DatasetInfosDict
    from huggingface_hub import DatasetCardData

    card_data = DatasetCardData(
        language="en",
        license="other",
        license_name=license_name,
        pretty_name=pretty_name,
        task_categories=task_categories,
        tags=tags,
        size_categories=_size_category(largest),
        configs=config_metadata,
    )
    DatasetInfosDict(dataset_infos).to_dataset_card_data(card_data)
    return card_data


def _size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M")):
        if n < limit:
            return label
    return "1M<n<10M"


def mcq_stats(records: list[dict], num_options: int) -> dict:
    """Statistics of text-MCQ records (the SurgiQ paper's Tables 2, 3 and section 3.4): counts per domain, question
    type and source type, the correct-answer position balance with a chi-square test against uniform, and the
    question length in words."""
    from scipy.stats import chisquare

    def counts(key: str) -> dict[str, int]:
        return dict(sorted(Counter(r[key] for r in records if r[key]).items()))

    positions = Counter(LETTERS[r["answer_index"]] for r in records)
    letters = list(LETTERS[:num_options])
    by_letter = {letter: positions.get(letter, 0) for letter in letters}
    words = [len(r["question"].split()) for r in records]
    domain_by_type: dict[str, dict[str, int]] = {}
    for record in records:
        row = domain_by_type.setdefault(record["domain"], {})
        row[record["question_type"]] = row.get(record["question_type"], 0) + 1
    return {
        "samples": len(records),
        "domains": counts("domain"),
        "question_types": counts("question_type"),
        "source_types": counts("source_type"),
        "domain_by_type": {d: dict(sorted(t.items())) for d, t in sorted(domain_by_type.items())},
        "answer_position": by_letter,
        "answer_pct": {k: round(100 * v / len(records), 1) if records else 0.0 for k, v in by_letter.items()},
        "answer_balance_p": round(float(chisquare(list(by_letter.values())).pvalue), 4) if records else None,
        "question_words": {
            "mean": round(statistics.fmean(words), 1) if words else 0.0,
            "median": round(statistics.median(words), 1) if words else 0.0,
            "std": round(statistics.stdev(words), 1) if len(words) > 1 else 0.0,
        },
    }


def plot_domain_type_distribution(stats: dict, domains: dict, question_types: dict, path: Path) -> None:
    """Stacked horizontal bars: questions per domain, split by question type."""
    plt = pyplot()

    rows = [d for d in domains if d in stats["domains"]] + sorted(set(stats["domains"]) - set(domains))
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.4), dpi=100)
    left = [0] * len(rows)
    for qtype, label in question_types.items():
        counts = [stats["domain_by_type"].get(d, {}).get(qtype, 0) for d in rows]
        ax.barh(range(len(rows)), counts, left=left, label=label)
        left = [a + b for a, b in zip(left, counts, strict=True)]
    ax.set_yticks(range(len(rows)), [domains.get(d, d) for d in rows])
    ax.invert_yaxis()
    ax.set_xlabel("questions")
    ax.legend(fontsize=8, ncols=len(question_types), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    save_figure(fig, path)


def render_mcq_card(
    configs: list[dict],
    config_metadata: list[dict],
    dataset_infos: dict[str, "DatasetInfo"],
    stats: dict[str, dict],
    *,
    vocabularies: dict[str, dict[str, str]],
    paper_answer_position: dict[str, float],
    extra_columns: list[str],
    repo_id: str = "ORG/surgiq",
    pretty_name: str = "SurgiQ",
) -> str:
    """Render the text-MCQ (SurgiQ) card. ``configs``: ``[{name, split, description}]``; ``stats``: per config."""
    first = stats[configs[0]["name"]]
    card_data = _card_data(
        pretty_name,
        "surgiq-release-terms",
        ["question-answering", "multiple-choice"],
        ["surgery", "medical", "surgiq", "multiple-choice", "benchmark"],
        first["samples"],
        config_metadata,
        dataset_infos,
    )

    def share(count: int) -> str:
        return f"{100 * count / first['samples']:.1f}" if first["samples"] else "-"

    tables = {
        name: [(slug, label, first[key].get(slug, 0), share(first[key].get(slug, 0))) for slug, label in vocab.items()]
        for name, vocab, key in (
            ("domains", vocabularies["domain"], "domains"),
            ("question_types", vocabularies["question_type"], "question_types"),
            ("source_types", vocabularies["source_type"], "source_types"),
        )
    }
    from huggingface_hub import DatasetCard

    card = DatasetCard.from_template(
        card_data,
        template_path=template_path("surgiq_dataset_card.md"),
        pretty_name=pretty_name,
        configs=[c | {"stats": stats[c["name"]]} for c in configs],
        first=first,
        tables=tables,
        domain_names=vocabularies["domain"],
        type_names=vocabularies["question_type"],
        letters=list(paper_answer_position),
        paper_answer_position=paper_answer_position,
        extra_columns=extra_columns,
        repo_id=repo_id,
    )
    return str(card)


def split_infos(features: "Features", written: list) -> "DatasetInfo":
    """One config's ``dataset_info`` from its written splits (summed when a split spans several folders)."""
    splits: dict[str, list[int]] = {}
    for part in written:
        sizes = splits.setdefault(part.split, [0, 0])
        sizes[0] += part.num_bytes
        sizes[1] += part.num_examples
    from datasets import DatasetInfo, SplitDict, SplitInfo

    return DatasetInfo(
        features=features,
        splits=SplitDict({name: SplitInfo(name, size, count) for name, (size, count) in splits.items()}),
        download_size=sum(part.download_size for part in written),
        dataset_size=sum(part.num_bytes for part in written),
    )


def render_public_card(
    manifest: dict,
    licenses: dict[str, str],
    paper_table: dict[str, list[int]],
    dataset_infos: dict[str, "DatasetInfo"],
    repo_id: str = "ORG/sureon-public",
    pretty_name: str = "Sureon public corpus",
) -> str:
    """Render the public-corpus card from the build manifest: the per-source table (the Sureon paper's Table 13 beside
    it), configs, and the QA-type and question-type distributions per branch."""
    sources = manifest["sources"]
    source_rows, branches = [], []
    qa_type_counts: dict[str, Counter] = {}
    question_type_counts: dict[str, Counter] = {}
    versions: set[str] = set()
    for name, info in sources.items():
        written = info["branches_written"]
        paper = paper_table.get(name, ["-", "-"])
        source_rows.append(
            {
                "name": name,
                "title": info["title"],
                "branch": " + ".join(written) or "-",
                "item_count": sum(w["items"] for w in written.values()),
                "qa_count": sum(w["qas"] for w in written.values()),
                "paper_items": f"{paper[0]:,}" if paper[0] != "-" else "-",
                "paper_qas": f"{paper[1]:,}" if paper[1] != "-" else "-",
                "license": licenses.get(name, "see the source"),
            }
        )
        for branch, summary in written.items():
            if branch not in branches:
                branches.append(branch)
            qa_type_counts.setdefault(branch, Counter()).update(summary["qa_types"])
            question_type_counts.setdefault(branch, Counter()).update(summary["question_types"])
            versions |= set(summary["versions"])
    config_rows = [
        {
            "name": name,
            "splits": ", ".join(info.splits),
            "qa_count": sum(split.num_examples for split in info.splits.values()),
        }
        for name, info in dataset_infos.items()
    ]
    paraphrase_rows = [
        {"name": name, **{k: info["paraphrase"].get(k, 0) for k in ("requested", "accepted", "rejected", "failed")}}
        for name, info in sources.items()
        if "paraphrase" in info
    ]
    card_data = _card_data(
        pretty_name,
        "derived-from-public-surgical-datasets",
        ["visual-question-answering", "image-text-to-text", "video-text-to-text"],
        ["surgical-video", "sureon", "medical", "surgical-data-science"],
        max((row["qa_count"] for row in config_rows), default=0),
        manifest["configs"],
        dataset_infos,
    )
    from huggingface_hub import DatasetCard

    card = DatasetCard.from_template(
        card_data,
        template_path=template_path("public_dataset_card.md"),
        pretty_name=pretty_name,
        versions=[v for v in ("template", "instruction", "paraphrase") if v in versions],
        source_rows=source_rows,
        total_items=sum(row["item_count"] for row in source_rows),
        total_qas=sum(row["qa_count"] for row in source_rows),
        config_rows=config_rows,
        branches=branches,
        qa_types=sorted({t for counts in qa_type_counts.values() for t in counts}),
        qa_type_counts=qa_type_counts,
        question_types=sorted({t for counts in question_type_counts.values() for t in counts}),
        question_type_counts=question_type_counts,
        paraphrase_rows=paraphrase_rows,
        repo_id=repo_id,
        citation=SUREON_CITATION,
    )
    return str(card)
