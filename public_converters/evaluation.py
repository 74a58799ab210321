"""Evaluation metadata of the public perception benchmarks (the Sureon paper's D.3), derived from the sources' split
data.

- **Official test splits** of Cholec80 (EndoNet: videos 41-80), HeiChole (the public 24 / 9 split) and Endoscapes
  (``test_vids.txt``: videos 162-201), read from each reader's default split variant, so the benchmark lists are the
  same data the readers validate against the release.
- **The Cholec80 clip-evaluation exclusions**: the Sureon paper drops "17 Cholec80 videos that overlap Endoscapes /
  CholecT50 training sources" without naming them. CholecT50 numbers its videos as Cholec80 does (``VIDnn`` =
  ``videoNN``), so the overlap with CholecT50 follows from its split lists: the Cholec80 test videos (41-80) that
  CholecT50's Rendezvous split (``cholect50``, the split its paper trains on) uses for training or validation. That
  gives exactly 17 videos. Endoscapes numbers its videos independently (1-201); mapping them to Cholec80 needs CAMMA's
  ``camma_dataset_overlaps`` table, which is not public data we have, so any Endoscapes overlap is not added here:
  that the Sureon paper's 17 are these 17 is inferred from the count, not confirmed.

``sureon build public`` writes these to ``evaluation/`` in the corpus; ``sureon report public --exclude-videos
cholec80:clip=<corpus>/evaluation/cholec80_excluded_videos.txt`` applies the exclusions.
"""

from __future__ import annotations

import json
from pathlib import Path

from public_converters.spec import get_source


BENCHMARK_SOURCES = ("cholec80", "heichole", "endoscapes")


def official_test_videos(name: str) -> list[str]:
    """The test videos of a source's default split variant, in the reader's video-id spelling."""
    spec = get_source(name)
    assignment = spec.split_variants[spec.default_split_variant]
    return sorted(video for video, split in assignment.items() if split == "test")


def cholec80_overlap(cholect50_variant: str = "cholect50") -> list[str]:
    """Cholec80 test videos that CholecT50 trains or validates on under ``cholect50_variant``."""
    cholect50 = get_source("cholect50").split_variants[cholect50_variant]
    used = {int(video.removeprefix("VID")) for video, split in cholect50.items() if split in ("train", "validation")}
    tests = official_test_videos("cholec80")
    return [video for video in tests if int(video.removeprefix("video")) in used]


def write_evaluation_metadata(folder: Path) -> dict:
    """``evaluation/official_test_videos.json`` and ``evaluation/cholec80_excluded_videos.txt``."""
    folder.mkdir(parents=True, exist_ok=True)
    tests = {name: official_test_videos(name) for name in BENCHMARK_SOURCES}
    excluded = cholec80_overlap()
    (folder / "official_test_videos.json").write_text(json.dumps(tests, indent=2) + "\n")
    lines = [
        "# Cholec80 test videos that CholecT50's Rendezvous split (cholect50) trains or validates on:",
        "# left out of Cholec80 clip evaluation (the Sureon paper's D.3). Derived by public_converters/evaluation.py;",
        "# Endoscapes overlaps are not included (its video numbering needs CAMMA's overlap table).",
        *excluded,
    ]
    (folder / "cholec80_excluded_videos.txt").write_text("\n".join(lines) + "\n")
    return {"official_test_videos": tests, "cholec80_excluded_videos": excluded}
