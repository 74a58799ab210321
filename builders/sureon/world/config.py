"""The settings of a world (:class:`WorldConfig`), checked when made, and read from a YAML or JSON file.

Apart because ``world.json`` records them and a world is made again from that file: every random choice is seeded
from the world's seed and stable ids, so two worlds with the same settings are byte-identical (videos included).
"""

import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from builders.errors import InputError
from builders.options import LETTERS
from builders.sureon.world.vocabulary import ALL_CODES
from builders.yaml_file import load_yaml_mapping


SHORTCUT_KINDS = ("length", "position", "narrated", "wording", "procedure")
# The kinds whose correct option sits at ``position_letter`` (planning.py).
AT_LETTER_KINDS = ("position", "narrated")
# The kinds whose cue a benchmark row can carry pointing at a wrong option (planning.py: decoys).
DECOY_KINDS = ("length", "narrated")
OPTION_ORDERS = ("shuffled", "vocabulary")
SHORTCUT_CLIPS = ("answer", "other")
SPLITS = ("train", "validation", "test")


@dataclass(frozen=True)
class WorldConfig:
    """Everything a world depends on; ``world.json`` records it, so a world can be made again from its file.

    ``videos``: source videos per split; ``questions_per_video``: per split (the categories cycle through
    ``categories``, offset per video, so each split is balanced); ``shortcuts``: ``{split: {kind: share}}``, the
    share of a split's MCQ rows planted with each kind (kinds exclusive, shares summing to at most 1); ``decoys``:
    ``{split: {kind: share}}`` (kinds of ``DECOY_KINDS``; ``{split: share}`` means ``length``), the share of its
    MCQ rows (others than the planted ones) whose kind's cue points at a distractor; ``shortcut_clips``: ``answer``
    (a planted row's clip shows its answer) or ``other`` (another answer's scene), for every split or per split
    (``{train: other, test: answer}``, a split left out: ``answer``), or per split and kind (``{train: {narrated:
    other, length: 0.5}}``, a share: of the kind's rows, seeded; a kind left out: ``answer``): a stage-1 training
    row may be written from the narration alone, while a benchmark row passed the experts' check that its clip shows
    its answer (the Sureon paper's stage 4).
    """

    seed: int = 0
    videos: dict = field(default_factory=lambda: {"train": 60, "validation": 8, "test": 20})
    questions_per_video: dict = field(default_factory=lambda: {"train": 12, "validation": 12, "test": 7})
    options: dict = field(default_factory=lambda: {"train": 4, "validation": 4, "test": 7})
    categories: tuple = ALL_CODES
    shortcuts: dict = field(default_factory=lambda: {"train": {"length": 0.5}, "validation": {"length": 0.5}})
    decoys: dict = field(default_factory=dict)
    shortcut_clips: str | dict = "answer"
    position_letter: str = "A"
    option_order: str = "shuffled"
    frame_size: int = 64
    fps: int = 4
    short_seconds: float = 4.0
    long_seconds: float = 9.0

    def __post_init__(self):
        unknown = [c for c in self.categories if c not in ALL_CODES]
        if unknown or not self.categories:
            raise InputError(f"categories {list(self.categories)}: each must be one of {', '.join(ALL_CODES)}")
        for split, shares in self.shortcuts.items():
            if split not in SPLITS:
                raise InputError(f"shortcuts: unknown split {split!r} (splits: {', '.join(SPLITS)})")
            bad = [kind for kind in shares if kind not in SHORTCUT_KINDS]
            if bad:
                raise InputError(f"shortcuts.{split}: unknown kind(s) {bad} (kinds: {', '.join(SHORTCUT_KINDS)})")
            if any(not 0 <= share <= 1 for share in shares.values()) or sum(shares.values()) > 1 + 1e-9:
                raise InputError(f"shortcuts.{split}: shares must lie in [0, 1] and sum to at most 1, got {shares}")
        for split, shares in self.decoys.items():
            if split not in SPLITS:
                raise InputError(f"decoys: unknown split {split!r} (splits: {', '.join(SPLITS)})")
            shares = self.decoy_shares(split)
            bad = [kind for kind in shares if kind not in DECOY_KINDS]
            if bad:
                raise InputError(f"decoys.{split}: unknown kind(s) {bad} (kinds: {', '.join(DECOY_KINDS)})")
            planted = sum((self.shortcuts.get(split) or {}).values())
            if any(not 0 <= share <= 1 for share in shares.values()) or planted + sum(shares.values()) > 1 + 1e-9:
                raise InputError(
                    f"decoys.{split}: shares in [0, 1] that with the split's shortcuts ({planted:g}) sum to at "
                    f"most 1, got {self.decoys[split]}"
                )
        for split in SPLITS:
            if not 2 <= int(self.options.get(split, 4)) <= 7:
                raise InputError(f"options.{split}: between 2 and 7 options (the vocabularies have 7 words)")
            if int(self.videos.get(split, 0)) < 1 or int(self.questions_per_video.get(split, 0)) < 1:
                raise InputError(f"{split}: needs at least one video and one question per video")
        if not _valid_shortcut_clips(self.shortcut_clips):
            raise InputError(
                f"shortcut_clips must be one of {', '.join(SHORTCUT_CLIPS)}, or a mapping of splits "
                f"({', '.join(SPLITS)}) to one of them or to a mapping of shortcut kinds to one of them or to a "
                f"share in [0, 1] (of the kind's rows whose clips show another answer), got {self.shortcut_clips!r}"
            )
        if self.option_order not in OPTION_ORDERS:
            raise InputError(f"option_order must be one of {', '.join(OPTION_ORDERS)}, got {self.option_order!r}")
        if self.position_letter not in LETTERS[: min(int(n) for n in self.options.values())]:
            raise InputError(f"position_letter {self.position_letter!r} is not a letter every split's options have")
        if self.frame_size % 32 or self.frame_size < 32:
            raise InputError(
                f"frame_size must be a multiple of 32 (the vision patches merge 2x2 of 16 px), got {self.frame_size}"
            )

    def decoy_shares(self, split: str) -> dict[str, float]:
        """``{kind: share}`` of ``split``'s decoys (a bare share is the ``length`` kind's)."""
        shares = self.decoys.get(split) or {}
        try:
            if not isinstance(shares, dict):
                return {"length": float(shares)}
            return {kind: float(share) for kind, share in shares.items()}
        except (TypeError, ValueError) as err:
            raise InputError(f"decoys.{split}: a share or a mapping of kinds to shares, got {shares!r}") from err

    def clips_shown(self, split: str, kind: str | None = None) -> str | float:
        """What a planted row's clip shows on ``split`` (for a row of shortcut ``kind``): ``answer``, ``other``, or
        the share of the kind's rows whose clips show another answer."""
        if not isinstance(self.shortcut_clips, dict):
            return self.shortcut_clips
        shown = self.shortcut_clips.get(split, "answer")
        return shown.get(kind, "answer") if isinstance(shown, dict) else shown

    @classmethod
    def from_dict(cls, values: dict) -> "WorldConfig":
        known = {f for f in cls.__dataclass_fields__}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InputError(f"world settings: unknown key(s) {unknown}; known: {sorted(known)}")
        values = dict(values)
        for key in ("videos", "questions_per_video", "options"):
            if key in values:
                values[key] = {**getattr(cls(), key), **values[key]}
        if "categories" in values:
            values["categories"] = tuple(values["categories"])
        return cls(**values)

    def with_overrides(self, **changes) -> "WorldConfig":
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def _valid_shortcut_clips(value) -> bool:
    """``answer`` / ``other``, or per split one of them or ``{kind: answer | other | share in [0, 1]}``."""
    if not isinstance(value, dict):
        return value in SHORTCUT_CLIPS
    for split, shown in value.items():
        if split not in SPLITS:
            return False
        if not isinstance(shown, dict):
            if shown not in SHORTCUT_CLIPS:
                return False
            continue
        for kind, clips in shown.items():
            share = isinstance(clips, (int, float)) and not isinstance(clips, bool) and 0 <= clips <= 1
            if kind not in SHORTCUT_KINDS or not (share or clips in SHORTCUT_CLIPS):
                return False
    return True


def load_config(path: Path | None, **overrides) -> WorldConfig:
    """Settings from a YAML / JSON file (a world's own ``world.json`` works: its ``config``), then ``overrides``."""
    values: dict = {}
    if path is not None:
        loaded = load_yaml_mapping(path, "world settings", "recipes/tiny/world/demo.yaml", allow_empty=True)
        values = loaded.get("config", loaded)
        if not isinstance(values, dict):
            raise InputError(f"{path}: its config: must be a mapping of world settings")
    return WorldConfig.from_dict(values).with_overrides(**overrides)


def config_json(config: WorldConfig) -> dict:
    """The settings as ``world.json`` records them (tuples as lists): what a rerun compares to keep its videos."""
    return json.loads(json.dumps(asdict(config)))
