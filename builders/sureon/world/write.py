"""Writing a world under ``out``: the release, its videos, and the ground truth beside them.

Layout: ``release/data/<split>-00000-of-00001.parquet`` (read by ``sureon build sureon --release out/release``),
``videos/<source_id>.mp4`` (``--videos out/videos``), ``shortcuts.jsonl`` (one line per question: split, category,
shortcut kind or null, decoy kind or null; read back by :mod:`builders.sureon.world.truth`), ``world.json`` (the
settings, vocabularies and counts) and ``corpus.txt`` (its questions and options, the text a tiny model's tokenizer
learns).
"""

import json
from collections import Counter
from pathlib import Path

from builders.outputs import write_atomic
from builders.sureon.release import write_release_splits
from builders.sureon.world.config import SPLITS, WorldConfig, config_json
from builders.sureon.world.planning import plan_world
from builders.sureon.world.rows import question_row
from builders.sureon.world.videos import lay_out_videos, write_video
from builders.sureon.world.vocabulary import COLOURS, INSTRUMENTS, MOTIONS, PATTERNS, PHASES, VOCABULARY


def write_world(out: Path, config: WorldConfig | None = None, *, videos: bool = True) -> dict:
    """Write the release, its videos and the ground truth under ``out``; returns ``world.json``'s content.

    A rerun with the same settings rewrites the same bytes; videos already present are kept only if ``world.json``
    says they were made with the same settings (otherwise they are rewritten)."""
    config = config or WorldConfig()
    out = Path(out)
    questions = plan_world(config)
    frames = lay_out_videos(config, questions)
    rows = {split: [question_row(config, q) for q in questions if q.split == split] for split in SPLITS}

    previous = out / "world.json"
    same_settings = previous.is_file() and json.loads(previous.read_text()).get("config") == config_json(config)
    write_release_splits(out / "release", rows)
    if videos:
        (out / "videos").mkdir(parents=True, exist_ok=True)
        for source_id, video_frames in frames.items():
            path = out / "videos" / f"{source_id}.mp4"
            if not (same_settings and path.is_file()):
                write_video(path, video_frames, config.fps)

    truth = [
        {"question_id": q.question_id, "split": q.split, "category": q.code, "shortcut": q.shortcut, "decoy": q.decoy}
        for q in questions
    ]
    write_atomic(out / "shortcuts.jsonl", "".join(json.dumps(t, sort_keys=True) + "\n" for t in truth))
    write_atomic(out / "corpus.txt", "".join(line + "\n" for line in corpus_lines(rows)))
    summary = {
        "config": config_json(config),
        "layout": {"release": "release", "videos": "videos", "shortcuts": "shortcuts.jsonl", "corpus": "corpus.txt"},
        "vocabulary": {code: list(words) for code, words in VOCABULARY.items()} | {"TO": list(PHASES)},
        "visual_primitives": {
            "colours": {name: list(rgb) for name, rgb in zip(INSTRUMENTS, COLOURS, strict=True)},
            "phase_cycle": list(PHASES),
            "motions": list(MOTIONS),
            "patterns": list(PATTERNS),
        },
        "counts": {
            split: {
                "videos": len({q.source_id for q in questions if q.split == split}),
                "questions": sum(q.split == split for q in questions),
                "categories": dict(sorted(Counter(q.code for q in questions if q.split == split).items())),
                "shortcuts": dict(
                    sorted(Counter(q.shortcut for q in questions if q.split == split and q.shortcut).items())
                ),
                "decoys": dict(sorted(Counter(q.decoy for q in questions if q.split == split and q.decoy).items())),
            }
            for split in SPLITS
        },
    }
    write_atomic(out / "world.json", json.dumps(summary, indent=1, sort_keys=True) + "\n")
    return summary


def corpus_lines(rows: dict[str, list[dict]]) -> list[str]:
    """The world's words, once each, in a stable order: tiny models' tokenizers are trained on them
    (``python -m recipes.training.tiny_models --corpus corpus.txt``), so a prompt is words rather than bytes."""
    lines: dict[str, None] = {}
    for split in SPLITS:
        for row in rows[split]:
            lines[row["question"]] = None
            for option in row["options"]:
                lines[option["text"]] = None
    return list(lines)
