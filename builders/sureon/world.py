"""A visually grounded synthetic Sureon world: a release in the official layout whose answers lie in the frames.

Why: every other fixture of the project proves that a stage *runs*. This one lets a test prove that the method
*works*: that a recipe learns what only the frames show, and that stage 3 (blind-test curation) finds the questions a
model can answer without them. Each question's answer is known by construction and drawn into its clip:

- EE: a solid square in one of seven colours -> which instrument is visible (colour -> instrument);
- EA, SPI: a square with one of seven fill patterns -> the state of the structure, the safety practice shown;
- AD, PAD, IAI, LAR: a square moving right / left / up / down, growing, shrinking or still -> the action, in four
  vocabularies (IAI names the instrument by its colour; LAR asks why);
- F: three consecutive phases of a fixed seven-phase cycle, one colour each -> the next phase;
- TO: three distinct phases in a random order -> their order as letters (``B,A,C``); SM: the same, as text.

Options are as the release has them (``docs/release_format.md``): 4 on train and validation, 7 on test, distractors
from the same seven-word vocabulary, shuffled by a seeded rng; TO and SM have none. ``option_order: vocabulary``
lists the options in the vocabulary's order instead: a two-layer model learns "this colour, this letter" on a CPU in a
few hundred steps, while pointing at a shuffled option by its content takes it thousands (measured: 300 steps of the
tiny recipe on shuffled options stay at chance), so the project's CPU learning checks use it. Every random choice
is seeded from the world's seed and stable ids, so two worlds with the same settings are byte-identical (videos
included).

**Planted language shortcuts** (the Sureon paper's Table 8 and Figure 9: stage 1's correct options differ from its
distractors), each on a configurable share of the MCQ rows of each split, at most one kind per row:

- ``length``: the correct option is longer and more specific than the distractors;
- ``position``: the correct option always sits at one letter (``position_letter``);
- ``wording``: the question names the answer (a narrator's remark appended to it);
- ``procedure``: a procedure prior, the same answer for every planted clip of one procedure and category (the
  question names the procedure, as every question of the world does).

By default a planted row stays visually grounded (its clip shows its answer): only its text gives the answer away
too. With ``shortcut_clips: other`` its clip shows the scene of another answer, as a stage-1 question written from
the narration alone can ask of a clip that does not show it: such a row teaches that the text settles the answer.

**Decoys** (``decoys: {split: share}``, on rows without a shortcut): a *distractor* is the longer, more specific
option. That is what stage 3's distractor hardening (the Sureon paper's Algorithm 1, B.4.3) leaves on a benchmark:
options drawn until the blind guessers fail, so a language prior learned from raw data points at a wrong option. A
benchmark (the test split) with decoys and a few residual shortcuts is one that was curated and hardened, whose experts
missed a few; on it a model that learned the length prior loses on decoys what it wins on residual shortcut rows.

The ground truth is written beside the release: ``shortcuts.jsonl`` (one line per question: split, category, kind or
null, decoy) and ``world.json`` (the settings, vocabularies and counts).

Layout written under ``out``: ``release/data/<split>-00000-of-00001.parquet`` (read by ``sureon build sureon
--release out/release``), ``videos/<source_id>.mp4`` (``--videos out/videos``), ``world.json``,
``shortcuts.jsonl``, and ``corpus.txt`` (its questions and options, the text a tiny model's tokenizer learns).
"""

import hashlib
import json
import random
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np

from builders.arguments import key_values, seed
from builders.errors import InputError
from builders.options import LETTERS, stable_seed
from builders.outputs import atomic_file, write_atomic
from builders.sureon.categories import BY_CODE
from builders.sureon.release import release_row, write_release_splits
from builders.yaml_file import load_yaml_mapping


STILL_HALF = 0.45  # half the side of a still object, in frame sizes
SHORTCUT_KINDS = ("length", "position", "wording", "procedure")
OPTION_ORDERS = ("shuffled", "vocabulary")
SHORTCUT_CLIPS = ("answer", "other")
SPLITS = ("train", "validation", "test")
MCQ_CODES = ("AD", "EE", "EA", "PAD", "IAI", "LAR", "SPI", "F")
ALL_CODES = (*MCQ_CODES, "TO", "SM")

# The seven colours of the world (RGB): instruments and phases are told apart by colour alone.
COLOURS = (
    (220, 40, 40),
    (40, 200, 60),
    (50, 80, 230),
    (235, 215, 40),
    (40, 210, 220),
    (210, 50, 200),
    (240, 240, 240),
)
INSTRUMENTS = (
    "Grasper",
    "Hook electrode",
    "Clip applier",
    "Scissors",
    "Suction irrigator",
    "Stapler",
    "Needle driver",
)
# The procedure's phases in their fixed order (a cycle): forecasting asks for the successor of the last one shown.
PHASES = ("Port placement", "Dissection", "Clipping", "Division", "Irrigation", "Extraction", "Closure")
MOTIONS = ("right", "left", "up", "down", "grow", "shrink", "still")
PATTERNS = ("solid", "hollow", "horizontal stripes", "vertical stripes", "checkers", "top half", "dot")

# Answer vocabularies, index-aligned with the visual primitive that shows them.
VOCABULARY = {
    "EE": INSTRUMENTS,
    "AD": (
        "Retracting to the right",
        "Retracting to the left",
        "Lifting the tissue",
        "Pressing down",
        "Advancing toward the camera",
        "Withdrawing from the camera",
        "Holding position",
    ),
    "PAD": ("Retracting", "Pulling", "Lifting", "Pressing", "Advancing", "Withdrawing", "Holding"),
    "IAI": (
        "Sweeping the tissue laterally",
        "Drawing the tissue medially",
        "Elevating the tissue",
        "Depressing the tissue",
        "Approaching the target",
        "Backing away from the target",
        "Keeping the tissue still",
    ),
    "LAR": (
        "To expose the triangle",
        "To open the window",
        "To lift the fundus",
        "To flatten the field",
        "To inspect closely",
        "To widen the view",
        "To keep tension",
    ),
    "EA": ("Intact", "Opened", "Clipped", "Transected", "Coagulated", "Bleeding", "Stapled"),
    "SPI": (
        "Critical view of safety",
        "Clip check before division",
        "Ureter identified",
        "Bleeding controlled",
        "Instrument count",
        "Leak test",
        "Safe port entry",
    ),
    "F": PHASES,
}
QUESTIONS = {
    "EE": "In this {procedure}, which instrument is visible?",
    "AD": "In this {procedure}, what action is being performed?",
    "PAD": "In this {procedure}, which action best describes this clip?",
    "IAI": "In this {procedure}, what is the {instrument} doing?",
    "LAR": "In this {procedure}, why is the {instrument} moved this way?",
    "EA": "In this {procedure}, what is the state of the structure?",
    "SPI": "In this {procedure}, which safety practice is shown?",
    "F": "In this {procedure}, what is the next step?",
    "TO": "In this {procedure}, order these events as they occur. A: {a} B: {b} C: {c}",
    "SM": "In this {procedure}, summarize the sequence of surgical steps.",
}
# The ``length`` shortcut: the correct option, made longer and more specific than its distractors.
ELABORATION = ", as clearly shown in the magnified view of the operative field"
# The ``wording`` shortcut: the question names the answer.
NARRATOR_REMARK = " The narrator mentions: {answer}."
# (procedure, specialty, subject): subjects stratify the guessers' folds (builders/sureon/folds.py).
PROCEDURES = (
    ("cholecystectomy", "General Surgery", "Hepatobiliary"),
    ("appendectomy", "General Surgery", "Colon"),
    ("hysterectomy", "Gynecology", "Uterus"),
    ("nephrectomy", "Urology", "Kidney"),
)
BACKGROUND = (28, 28, 32)


@dataclass(frozen=True)
class WorldConfig:
    """Everything a world depends on; ``world.json`` records it, so a world can be made again from its file.

    ``videos``: source videos per split; ``questions_per_video``: per split (the categories cycle through
    ``categories``, offset per video, so each split is balanced); ``shortcuts``: ``{split: {kind: share}}``, the
    share of a split's MCQ rows planted with each kind (kinds exclusive, shares summing to at most 1); ``decoys``:
    ``{split: share}``, the share of its MCQ rows (others than the planted ones) whose longer option is a
    distractor; ``shortcut_clips``: ``answer`` (a planted row's clip shows its answer) or ``other`` (another
    answer's scene).
    """

    seed: int = 0
    videos: dict = field(default_factory=lambda: {"train": 60, "validation": 8, "test": 20})
    questions_per_video: dict = field(default_factory=lambda: {"train": 12, "validation": 12, "test": 7})
    options: dict = field(default_factory=lambda: {"train": 4, "validation": 4, "test": 7})
    categories: tuple = ALL_CODES
    shortcuts: dict = field(default_factory=lambda: {"train": {"length": 0.5}, "validation": {"length": 0.5}})
    decoys: dict = field(default_factory=dict)
    shortcut_clips: str = "answer"
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
        for split, share in self.decoys.items():
            if split not in SPLITS:
                raise InputError(f"decoys: unknown split {split!r} (splits: {', '.join(SPLITS)})")
            planted = sum((self.shortcuts.get(split) or {}).values())
            if not 0 <= float(share) <= 1 or planted + float(share) > 1 + 1e-9:
                raise InputError(
                    f"decoys.{split}: a share in [0, 1] that with the split's shortcuts ({planted:g}) sums to at "
                    f"most 1, got {share}"
                )
        for split in SPLITS:
            if not 2 <= int(self.options.get(split, 4)) <= 7:
                raise InputError(f"options.{split}: between 2 and 7 options (the vocabularies have 7 words)")
            if int(self.videos.get(split, 0)) < 1 or int(self.questions_per_video.get(split, 0)) < 1:
                raise InputError(f"{split}: needs at least one video and one question per video")
        if self.shortcut_clips not in SHORTCUT_CLIPS:
            raise InputError(f"shortcut_clips must be one of {', '.join(SHORTCUT_CLIPS)}, got {self.shortcut_clips!r}")
        if self.option_order not in OPTION_ORDERS:
            raise InputError(f"option_order must be one of {', '.join(OPTION_ORDERS)}, got {self.option_order!r}")
        if self.position_letter not in LETTERS[: min(int(n) for n in self.options.values())]:
            raise InputError(f"position_letter {self.position_letter!r} is not a letter every split's options have")
        if self.frame_size % 32 or self.frame_size < 32:
            raise InputError(
                f"frame_size must be a multiple of 32 (the vision patches merge 2x2 of 16 px), got {self.frame_size}"
            )

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


# --------------------------------------------------------------------------------------------------------- frames


def _square(frame: np.ndarray, centre: tuple[float, float], half: float, colour, pattern: str = "solid") -> None:
    size = frame.shape[0]
    cx, cy = centre
    x0, x1 = max(0, round(cx - half)), min(size, round(cx + half))
    y0, y1 = max(0, round(cy - half)), min(size, round(cy + half))
    if x1 <= x0 or y1 <= y0:
        return
    w, h = x1 - x0, y1 - y0
    v, u = np.ogrid[0:h, 0:w]  # row and column within the square, broadcast against each other
    border = max(2, w // 6)
    masks = {  # only the asked pattern's is computed: drawing is most of a world's CPU time
        "solid": lambda: np.ones((h, w), dtype=bool),
        "hollow": lambda: (u < border) | (u >= w - border) | (v < border) | (v >= h - border),
        "horizontal stripes": lambda: (v // 4) % 2 == 0,
        "vertical stripes": lambda: (u // 4) % 2 == 0,
        "checkers": lambda: ((u // 6) + (v // 6)) % 2 == 0,
        "top half": lambda: v < h // 2,
        "dot": lambda: (abs(u - w / 2) < w / 5) & (abs(v - h / 2) < h / 5),
    }
    frame[y0:y1, x0:x1][np.broadcast_to(masks[pattern](), (h, w))] = colour


def draw_frame(size: int, *, colour, motion: str = "still", pattern: str = "solid", progress: float = 0.5):
    """One frame: a square of ``colour`` / ``pattern`` whose place and size follow ``motion`` at ``progress`` in
    [0, 1] of its segment."""
    frame = np.empty((size, size, 3), dtype=np.uint8)
    frame[:] = BACKGROUND
    travel = size * 0.3
    # a still object fills most of the view; a moving one leaves room to travel. Measured on the tiny recipe: with
    # the still object as small as a moving one, its colour questions stayed at chance for 300 to 1,000+ steps
    # (seed-dependent); filling the view, it leaves the plateau within 200
    centre, half = [size / 2, size / 2], size * (STILL_HALF if motion == "still" else 0.22)
    offset = (progress - 0.5) * 2 * travel
    if motion == "right":
        centre[0] += offset
    elif motion == "left":
        centre[0] -= offset
    elif motion == "up":
        centre[1] -= offset
    elif motion == "down":
        centre[1] += offset
    elif motion in ("grow", "shrink"):
        scale = progress if motion == "grow" else 1 - progress
        half = size * (0.1 + 0.25 * scale)
    elif motion != "still":
        raise InputError(f"unknown motion {motion!r}")
    _square(frame, tuple(centre), half, colour, pattern)
    return frame


# ------------------------------------------------------------------------------------------------------ questions


@dataclass
class Question:
    """One question of the world, before it becomes a release row: what its clip shows and what it asks."""

    question_id: str
    split: str
    source_id: str
    code: str
    procedure: tuple
    answer_index: int  # into the category's vocabulary (MCQ) or the shown phases (TO / SM)
    scene: dict  # how to draw the clip: colour / motion / pattern, or the phases in order
    shortcut: str | None = None
    decoy: bool = False
    start: float = 0.0
    end: float = 0.0


def source_ids(config: WorldConfig, split: str) -> list[str]:
    """Eleven-character YouTube-like ids (``[A-Za-z0-9_-]``), stable for a seed and split."""
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    ids = []
    for number in range(int(config.videos[split])):
        digest = hashlib.sha256(f"world|{config.seed}|{split}|{number}".encode()).digest()
        ids.append("".join(alphabet[b % 64] for b in digest[:11]))
    return ids


def _plan_split(config: WorldConfig, split: str) -> list[Question]:
    questions = []
    per_video = int(config.questions_per_video[split])
    for video_number, source_id in enumerate(source_ids(config, split)):
        procedure = PROCEDURES[video_number % len(PROCEDURES)]
        for slot in range(per_video):
            code = config.categories[(video_number + slot) % len(config.categories)]
            question_id = f"world_{split}_{len(questions):05d}"
            rng = random.Random(stable_seed(str(config.seed), question_id, "scene"))
            questions.append(_draw_question(rng, question_id, split, source_id, code, procedure))
    return questions


def _scene(code: str, answer: int, colour: int) -> dict:
    """How a clip shows ``answer`` (a vocabulary index) for a question of category ``code``."""
    if code == "EE":
        return {"colour": answer, "motion": "still", "pattern": "solid"}
    if code in ("EA", "SPI"):
        return {"colour": colour, "motion": "still", "pattern": PATTERNS[answer]}
    if code == "F":
        last = (answer - 1) % 7
        return {"phases": [(last - 2) % 7, (last - 1) % 7, last]}
    return {"colour": colour, "motion": MOTIONS[answer], "pattern": "solid"}  # AD, PAD, IAI, LAR


def _draw_question(rng, question_id, split, source_id, code, procedure) -> Question:
    colour = rng.randrange(7)
    if code in ("TO", "SM"):
        phases = rng.sample(range(7), 3)
        return Question(question_id, split, source_id, code, procedure, 0, {"phases": phases})
    answer = rng.randrange(7)
    return Question(question_id, split, source_id, code, procedure, answer, _scene(code, answer, colour))


def _assign_shortcuts(config: WorldConfig, questions: list[Question]) -> None:
    """Exact shares: the split's MCQ rows ordered by a seeded hash, the first ``round(share * n)`` to each kind, the
    next ones decoys."""
    by_split: dict[str, list[Question]] = {}
    for q in questions:
        if q.code in MCQ_CODES:
            by_split.setdefault(q.split, []).append(q)
    for split, rows in by_split.items():
        shares = config.shortcuts.get(split) or {}
        ranked = sorted(rows, key=lambda q: stable_seed(str(config.seed), q.question_id, "shortcut"))
        taken = 0
        for kind in SHORTCUT_KINDS:
            count = round(shares.get(kind, 0.0) * len(ranked))
            for q in ranked[taken : taken + count]:
                q.shortcut = kind
            taken += count
        for q in ranked[taken : taken + round(float(config.decoys.get(split, 0.0)) * len(ranked))]:
            q.decoy = True


def procedure_prior(config: WorldConfig, procedure: str, code: str) -> int:
    """The answer (vocabulary index) the ``procedure`` shortcut gives every planted clip of a procedure/category."""
    return stable_seed(str(config.seed), procedure, code, "prior") % 7


def _apply_procedure_prior(config: WorldConfig, q: Question) -> None:
    q.answer_index = procedure_prior(config, q.procedure[0], q.code)
    q.scene = _scene(q.code, q.answer_index, q.scene.get("colour", 0))


# ----------------------------------------------------------------------------------------------------------- rows


def _options(config: WorldConfig, q: Question) -> tuple[list[str], str]:
    """The lettered option texts and the correct one: distractors from the vocabulary, shuffled by a seeded rng."""
    vocabulary = VOCABULARY[q.code]
    count = int(config.options[q.split])
    rng = random.Random(stable_seed(str(config.seed), q.question_id, "options"))
    distractors = rng.sample([i for i in range(7) if i != q.answer_index], count - 1)
    correct = vocabulary[q.answer_index] + (ELABORATION if q.shortcut == "length" else "")
    decoy = rng.choice(distractors) if q.decoy else None
    words = [w + (ELABORATION if i == decoy else "") for i, w in enumerate(vocabulary)]
    if config.option_order == "vocabulary":
        chosen = sorted([*distractors, q.answer_index])
        texts = [correct if i == q.answer_index else words[i] for i in chosen]
        if q.shortcut == "position":
            texts.remove(correct)
            texts.insert(LETTERS.index(config.position_letter), correct)
        return texts, correct
    texts = [words[i] for i in distractors]
    position = LETTERS.index(config.position_letter) if q.shortcut == "position" else rng.randrange(count)
    texts.insert(position, correct)
    return texts, correct


def _row(config: WorldConfig, q: Question) -> dict:
    procedure, specialty, subject = q.procedure
    slug = BY_CODE[q.code].slug
    instrument = INSTRUMENTS[q.scene.get("colour", 0)].lower()
    texts, answer = [], ""
    if q.code in ("TO", "SM"):
        shown = q.scene["phases"]
        letters = random.Random(stable_seed(str(config.seed), q.question_id, "events")).sample(range(3), 3)
        # letters[k]: the event letter of the k-th phase shown
        events = {LETTERS[letters[k]]: PHASES[phase] for k, phase in enumerate(shown)}
        a, b, c = (events[letter].lower() for letter in "ABC")
        question = QUESTIONS[q.code].format(procedure=procedure, a=a, b=b, c=c)
        if q.code == "TO":
            answer = ",".join(LETTERS[letters[k]] for k in range(3))
        else:
            answer = ", then ".join(PHASES[phase] for phase in shown) + "."
    else:
        question = QUESTIONS[q.code].format(procedure=procedure, instrument=instrument)
        texts, answer = _options(config, q)
        if q.shortcut == "wording":
            question += NARRATOR_REMARK.format(answer=answer.lower())
    return release_row(
        question_id=q.question_id,
        source_id=q.source_id,
        category=slug,
        start=q.start,
        end=q.end,
        question=question,
        answer=answer,
        option_texts=texts,
        topic=(specialty, subject, procedure.capitalize()),
        narration="We continue with this part of the procedure.",
    )


# --------------------------------------------------------------------------------------------------------- videos


def _segment_frames(config: WorldConfig, q: Question, count: int):
    size = config.frame_size
    for index in range(count):
        progress = index / max(1, count - 1)
        if "phases" in q.scene:
            phase = q.scene["phases"][min(2, index * 3 // count)]
            yield draw_frame(size, colour=COLOURS[phase])
        else:
            colour = COLOURS[q.scene["colour"]]
            yield draw_frame(
                size, colour=colour, motion=q.scene["motion"], pattern=q.scene["pattern"], progress=progress
            )


def _write_video(path: Path, frames: list[np.ndarray], fps: int) -> None:
    """H.264 mp4 (yuv420p, every 8th frame a keyframe), written to a temporary name then moved into place."""
    import av

    with atomic_file(path) as partial, av.open(str(partial), mode="w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = frames[0].shape[1], frames[0].shape[0]
        stream.pix_fmt = "yuv420p"
        stream.gop_size = 8
        # deterministic output: one thread, no timing-dependent rate control
        stream.options = {"crf": "10", "preset": "veryfast", "threads": "1"}
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode())


def _lay_out_videos(config: WorldConfig, questions: list[Question]) -> dict[str, list[np.ndarray]]:
    """Each video is its questions' segments back to back, a blank second between them; each window spans exactly
    its segment's frames (from its first frame to its last), so no sampled frame belongs to another question."""
    fps = config.fps
    blank = draw_frame(config.frame_size, colour=BACKGROUND)
    videos: dict[str, list[np.ndarray]] = {}
    for q in questions:
        frames = videos.setdefault(q.source_id, [])
        frames.extend([blank] * fps)
        seconds = config.long_seconds if q.code in ("F", "TO", "SM") else config.short_seconds
        count = round(seconds * fps)
        q.start = len(frames) / fps
        frames.extend(_segment_frames(config, q, count))
        q.end = (len(frames) - 1) / fps
    for frames in videos.values():
        frames.extend([blank] * fps)
    return videos


# ---------------------------------------------------------------------------------------------------------- world


def plan_world(config: WorldConfig) -> list[Question]:
    """Every question of the world, shortcuts planted and clip windows laid out (no file written)."""
    questions = [q for split in SPLITS for q in _plan_split(config, split)]
    _assign_shortcuts(config, questions)
    for q in questions:
        if q.shortcut == "procedure":
            _apply_procedure_prior(config, q)
        if q.shortcut and config.shortcut_clips == "other":
            rng = random.Random(stable_seed(str(config.seed), q.question_id, "other clip"))
            shown = rng.choice([i for i in range(7) if i != q.answer_index])
            q.scene = _scene(q.code, shown, q.scene.get("colour", 0))
    return questions


def write_world(out: Path, config: WorldConfig | None = None, *, videos: bool = True) -> dict:
    """Write the release, its videos and the ground truth under ``out``; returns ``world.json``'s content.

    A rerun with the same settings rewrites the same bytes; videos already present are kept only if ``world.json``
    says they were made with the same settings (otherwise they are rewritten)."""
    config = config or WorldConfig()
    out = Path(out)
    questions = plan_world(config)
    frames = _lay_out_videos(config, questions)
    rows = {split: [_row(config, q) for q in questions if q.split == split] for split in SPLITS}

    previous = out / "world.json"
    same_settings = previous.is_file() and json.loads(previous.read_text()).get("config") == _config_json(config)
    write_release_splits(out / "release", rows)
    if videos:
        (out / "videos").mkdir(parents=True, exist_ok=True)
        for source_id, video_frames in frames.items():
            path = out / "videos" / f"{source_id}.mp4"
            if not (same_settings and path.is_file()):
                _write_video(path, video_frames, config.fps)

    truth = [
        {"question_id": q.question_id, "split": q.split, "category": q.code, "shortcut": q.shortcut, "decoy": q.decoy}
        for q in questions
    ]
    write_atomic(out / "shortcuts.jsonl", "".join(json.dumps(t, sort_keys=True) + "\n" for t in truth))
    write_atomic(out / "corpus.txt", "".join(line + "\n" for line in corpus_lines(rows)))
    summary = {
        "config": _config_json(config),
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
                "decoys": sum(q.decoy for q in questions if q.split == split),
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


def read_truth(path: Path) -> list[dict]:
    """The entries of a world's ``shortcuts.jsonl`` (or of the folder holding it), one per question."""
    path = Path(path)
    if path.is_dir():
        path = path / "shortcuts.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no shortcut ground truth here (a world made by `sureon world` has one)")
    entries = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as err:
                raise InputError(f"{path}, line {number}: not JSON ({err})") from err
            if not isinstance(entry, dict) or "question_id" not in entry:
                raise InputError(f"{path}, line {number}: not a shortcut entry (no question_id)")
            entries.append(entry)
    return entries


def read_shortcuts(path: Path) -> dict[str, str | None]:
    """``{question_id: kind or None}`` from a world's ``shortcuts.jsonl`` (or the folder holding it)."""
    return {entry["question_id"]: entry.get("shortcut") for entry in read_truth(path)}


def row_kinds(path: Path) -> dict[str, str]:
    """``{question_id: "shortcut" | "decoy" | "plain"}``: what each question's text does for a blind model."""
    return {
        e["question_id"]: "shortcut" if e.get("shortcut") else "decoy" if e.get("decoy") else "plain"
        for e in read_truth(path)
    }


def load_config(path: Path | None, **overrides) -> WorldConfig:
    """Settings from a YAML / JSON file (a world's own ``world.json`` works: its ``config``), then ``overrides``."""
    values: dict = {}
    if path is not None:
        loaded = load_yaml_mapping(path, "world settings", "recipes/tiny/world/demo.yaml", allow_empty=True)
        values = loaded.get("config", loaded)
        if not isinstance(values, dict):
            raise InputError(f"{path}: its config: must be a mapping of world settings")
    return WorldConfig.from_dict(values).with_overrides(**overrides)


def _config_json(config: WorldConfig) -> dict:
    return json.loads(json.dumps(asdict(config)))


# ---------------------------------------------------------------------------------------------------- command line


def add_arguments(parser) -> None:
    parser.add_argument("--out", type=Path, required=True, help="folder for release/, videos/, world.json, ...")
    parser.add_argument("--config", type=Path, help="world settings (YAML or a world's world.json)")
    parser.add_argument("--seed", type=seed)
    parser.add_argument(
        "--videos-per-split", nargs="+", metavar="SPLIT=N", help="source videos per split, e.g. train=60 test=20"
    )
    parser.add_argument("--categories", nargs="+", choices=ALL_CODES, help="category codes (default: all ten)")
    parser.add_argument(
        "--shortcut",
        action="append",
        metavar="SPLIT:KIND=SHARE",
        help=f"planted shortcut share, e.g. train:length=0.5 (kinds: {', '.join(SHORTCUT_KINDS)}); replaces the "
        "settings' shortcuts for the splits named",
    )
    parser.add_argument("--no-videos", action="store_true", help="write the release and ground truth only")


def _number(text: str, kind: type, option: str, where: str):
    try:
        return kind(text)
    except ValueError:
        raise InputError(f"{option} {where}: {text!r} is not a number") from None


def run(args) -> int:
    config = load_config(args.config, seed=args.seed)
    if args.videos_per_split:
        counts = {
            split: _number(n, int, "--videos-per-split", split)
            for split, n in key_values(args.videos_per_split, "--videos-per-split", "train=60").items()
        }
        config = WorldConfig.from_dict({**_config_json(config), "videos": counts})
    if args.categories:
        config = replace(config, categories=tuple(args.categories))
    if args.shortcut:
        shortcuts: dict[str, dict[str, float]] = {}
        for spec in args.shortcut:
            split, sep, rest = spec.partition(":")
            if not sep:
                raise InputError(f"--shortcut {spec!r}: expected SPLIT:KIND=SHARE")
            shares = key_values([rest], "--shortcut", "train:length=0.5")
            shortcuts.setdefault(split, {}).update(
                {k: _number(v, float, "--shortcut", spec) for k, v in shares.items()}
            )
        config = WorldConfig.from_dict({**_config_json(config), "shortcuts": {**config.shortcuts, **shortcuts}})
    summary = write_world(args.out, config, videos=not args.no_videos)
    for split, counts in summary["counts"].items():
        planted = ", ".join(f"{kind} {n}" for kind, n in counts["shortcuts"].items()) or "none"
        print(f"{split}: {counts['questions']} questions over {counts['videos']} videos; shortcuts: {planted}")
    print(f"world written to {args.out} (release/, videos/, world.json, shortcuts.jsonl); build it with")
    print(f"  sureon build sureon --release {args.out}/release --videos {args.out}/videos --out BUILD")
    return 0
