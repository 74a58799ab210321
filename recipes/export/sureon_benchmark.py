"""What the Sureon benchmark's exports (``lmms_eval``, ``vlmevalkit``) share: the local build they read, its
accuracy-scored categories, and the metrics named as both harnesses report them (``mu_visual``, ``visual_AD``,
``mg``, ``mg_TO``, ...) with their values read off :func:`recipes.evaluation.sureon.evaluate.summarize`.

Apart from either export because VLMEvalKit's dataset class scores with these names inside VLMEvalKit's own
environment, which should import no more of the project than scoring needs (the lmms-eval export's module brings the
evaluation runner with it).
"""

from pathlib import Path

from builders.errors import InputError
from builders.sureon.categories import MCQ, ORDERING


REQUIRED_COLUMNS = ("question_id", "category", "question", "answer_format", "frames", "frame_timestamps")


def load_sureon_split(dataset: str, config: str, split: str, harness: str):
    """``(absolute build folder, split)`` of a local Sureon build with frames for every question; anything else (a
    Hub id, a public-corpus build, an annotation-only build) is refused with what to do instead."""
    from builders.build_loading import load_build
    from builders.hub import check_build_path

    check_build_path(dataset, "--dataset")
    source = Path(dataset).expanduser().resolve()
    if not source.is_dir():
        what = "no such folder" if not source.exists() else "not a folder"
        raise InputError(f"--dataset {dataset}: {what} ({harness} reads a local build by path): check the path")
    docs = load_build(source, config, split, expected=f"{harness} tasks are exported from a Sureon build with frames")
    missing = [column for column in REQUIRED_COLUMNS if column not in docs.column_names]
    if "question_id" in missing or "category" in missing or "answer_format" in missing:
        raise InputError(
            f"{dataset} ({config}/{split}) is not a Sureon build (it lacks {', '.join(missing)}): export a folder "
            "built by `sureon build sureon --videos ...`; a public-corpus build's benchmarks run with `sureon eval "
            "public`"
        )
    if missing:
        raise InputError(
            f"{dataset} ({config}/{split}) has no frames (an annotation-only build): rebuild it with `sureon build "
            "sureon --videos ...`"
        )
    empty = [qid for qid, ts in zip(docs["question_id"], docs["frame_timestamps"], strict=True) if not ts]
    if empty:
        raise InputError(f"{dataset}: {len(empty)} question(s) without frames, e.g. {empty[:3]}: rebuild with videos")
    return source, docs


def accuracy_categories(dataset) -> list[str]:
    """The accuracy-scored categories present, in the paper's order (others after, alphabetically)."""
    from recipes.evaluation.sureon.metrics import subset_order

    scored = {
        c for c, fmt in zip(dataset["category"], dataset["answer_format"], strict=True) if fmt in (MCQ, ORDERING)
    }
    unsafe = [c for c in scored if not c.replace("_", "").isalnum()]
    if unsafe:
        raise InputError(f"categories {unsafe} cannot name a metric (letters, digits and _ only)")
    return subset_order(scored)


def metric_names(modes: tuple[str, ...], categories: list[str]) -> list[str]:
    """μ per condition, each category per condition and, with both conditions, MG overall and per category."""
    names = [f"mu_{mode}" for mode in modes] + [f"{mode}_{c}" for mode in modes for c in categories]
    if len(modes) == 2:
        names += ["mg"] + [f"mg_{c}" for c in categories]
    return names


def metric_value(summary: dict, metric: str) -> float | None:
    """One metric named as :func:`metric_names` names them, read from :func:`summarize`'s summary."""
    kind, _, category = metric.partition("_")
    if kind == "mg":
        gain = summary["multimodal_gain"]
        return gain["mu"] if not category else gain["per_category"].get(category)
    if kind == "mu":
        return summary["modes"][category]["mu"]
    return summary["modes"][kind]["per_category"].get(category, {}).get("accuracy")
