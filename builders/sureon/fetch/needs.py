"""What a release needs of its source videos: for each source, the clip windows asked of it and the questions it
feeds, per split.

Apart from the fetcher because it reads the release, not the network: the windows decide what a downloaded file must
cover (:mod:`builders.sureon.fetch.integrity`) and which span ``--sections`` downloads, and the question counts are
what the report says a missing source costs. It reads a release folder, or a folder built by ``sureon build``.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from builders.errors import InputError
from builders.sureon.clips import HASH_ID
from builders.sureon.configs import passes_curation, select_configs
from builders.sureon.release import read_release


SPLIT_KEYS = ("test", "train", "validation")


@dataclass
class SourceNeed:
    """One source video: the clip windows asked of it and the questions it feeds, per split."""

    source_id: str
    windows: set[tuple[float, float]] = field(default_factory=set)
    questions: dict[str, set[str]] = field(default_factory=dict)

    @property
    def fetchable(self) -> bool:
        return not HASH_ID.match(self.source_id)

    def span(self, pad: float) -> tuple[float, float]:
        return max(0.0, min(s for s, _ in self.windows) - pad), max(e for _, e in self.windows) + pad

    def counts(self) -> dict[str, int]:
        return {split: len(self.questions.get(split, ())) for split in SPLIT_KEYS}


def _add(needs: dict[str, SourceNeed], split: str, question_id: str, source_id: str, start: float, end: float):
    need = needs.setdefault(source_id, SourceNeed(source_id))
    need.windows.add((float(start), float(end)))
    need.questions.setdefault(split, set()).add(question_id)


def needed_sources(release: Path, configs: list[str] | None = None) -> dict[str, SourceNeed]:
    """The sources of ``configs`` (default: all) of a release folder, or of a folder built by ``sureon build``."""
    needs: dict[str, SourceNeed] = {}
    manifest = release / "build_manifest.json"
    if manifest.is_file():
        built = json.loads(manifest.read_text())["configs"]
        unknown = sorted(set(configs or ()) - set(built))
        if unknown:
            raise InputError(f"{release} was built without config(s) {unknown} (it has {sorted(built)})")
        for name in configs or sorted(built):
            for path in sorted((release / name).glob("*.parquet")):
                table = pq.read_table(path, columns=["question_id", "source_id", "start", "end"])
                for row in table.to_pylist():
                    _add(needs, built[name]["split"], row["question_id"], row["source_id"], row["start"], row["end"])
        return needs
    parsed = read_release(release)
    for spec in select_configs(parsed, configs):
        for record in parsed.splits[spec.split].records:
            if not spec.curated_only or passes_curation(record):
                _add(needs, spec.split, record["question_id"], record["source_id"], record["start"], record["end"])
    return needs
