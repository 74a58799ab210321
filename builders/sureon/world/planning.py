"""Planning a world's questions: what each clip shows and asks, and which rows carry a planted shortcut or a decoy.

**Planted language shortcuts** (the Sureon paper's Table 8 and Figure 9: stage 1's correct options differ from its
distractors), each on a configurable share of the MCQ rows of each split, at most one kind per row:

- ``length``: the correct option is longer and more specific than the distractors;
- ``position``: the correct option always sits at one letter (``position_letter``); with ``option_order:
  vocabulary`` the row asks for the word the vocabulary puts at that letter (its clip drawn to match), so no option
  leaves its place: moving the answer there would also move the others, and a model that reads "this colour, this
  letter" from the frames would be wrong on a row whose clip shows the answer;
- ``narrated``: the question is worded from the narration ("According to the narration, ...") and its correct
  option sits at ``position_letter`` (placed as ``position`` places it): a generator LLM's letter bias on the
  questions it wrote from the narration alone. Unlike ``position`` a blind model can tell these rows from the others
  by their wording, as the Sureon paper's stage-3 blind guessers tell a generator's habits;
- ``wording``: the question names the answer (a narrator's remark appended to it);
- ``procedure``: a procedure prior, the same answer for every planted clip of one procedure and category (the
  question names the procedure, as every question of the world does).

By default a planted row stays visually grounded (its clip shows its answer): only its text gives the answer away
too. With ``shortcut_clips: other`` (for every split, per split, or per split and kind) its clip shows the scene of
another answer, as a stage-1 question written from the narration alone can ask of a clip that does not show it: such
a row teaches that the text settles the answer.

**Decoys** (``decoys: {split: {kind: share}}``, on rows without a shortcut), a cue of a shortcut kind that points
at a wrong option: ``length``, a *distractor* is the longer, more specific option, what stage 3's distractor
hardening (the Sureon paper's Algorithm 1, B.4.3) leaves on a benchmark (options drawn until the blind guessers
fail); ``narrated``, a question worded from the narration whose correct option is *not* at ``position_letter``, as
on a curated benchmark, whose blind test leaves no letter skew. A benchmark (the test split) with decoys and a few
residual shortcuts is one that was curated and hardened, whose experts missed a few; on it a model that learned a
language prior loses on decoys what it wins on residual shortcut rows.

The plan writes no file: :mod:`builders.sureon.world.rows` words it, :mod:`builders.sureon.world.videos` draws it.
"""

import hashlib
import random
from dataclasses import dataclass, replace

from builders.options import LETTERS, stable_seed
from builders.sureon.world.config import AT_LETTER_KINDS, DECOY_KINDS, SHORTCUT_KINDS, SPLITS, WorldConfig
from builders.sureon.world.vocabulary import MCQ_CODES, MOTIONS, PATTERNS, PROCEDURES


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
    decoy: str | None = None  # the kind whose cue points at a distractor
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
    next ones decoys of each kind."""
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
        decoys = config.decoy_shares(split)
        for kind in DECOY_KINDS:
            count = round(decoys.get(kind, 0.0) * len(ranked))
            for q in ranked[taken : taken + count]:
                q.decoy = kind
            taken += count


def procedure_prior(config: WorldConfig, procedure: str, code: str) -> int:
    """The answer (vocabulary index) the ``procedure`` shortcut gives every planted clip of a procedure/category."""
    return stable_seed(str(config.seed), procedure, code, "prior") % 7


def _apply_procedure_prior(config: WorldConfig, q: Question) -> None:
    q.answer_index = procedure_prior(config, q.procedure[0], q.code)
    q.scene = _scene(q.code, q.answer_index, q.scene.get("colour", 0))


def _apply_position(config: WorldConfig, q: Question) -> None:
    """In the vocabulary's order, a position row asks for the word at ``position_letter`` (its rows keep the words
    before it among the options, :func:`builders.sureon.world.rows._options`)."""
    q.answer_index = LETTERS.index(config.position_letter)
    q.scene = _scene(q.code, q.answer_index, q.scene.get("colour", 0))


def answer_letters(config: WorldConfig, q: Question) -> list[int]:
    """In the vocabulary's order, the letters (indices) ``q``'s answer can take: as many distractors below its word
    as the vocabulary and the option count allow."""
    count, below_words = int(config.options[q.split]), q.answer_index
    return list(range(max(0, count - 1 - (6 - below_words)), min(below_words, count - 1) + 1))


def _apply_narrated_decoy(config: WorldConfig, q: Question) -> None:
    """In the vocabulary's order, a narrated decoy asks for a word that can sit at a letter other than
    ``position_letter`` (redrawn, seeded, when its drawn answer cannot)."""
    letter = LETTERS.index(config.position_letter)
    if any(k != letter for k in answer_letters(config, q)):
        return
    rng = random.Random(stable_seed(str(config.seed), q.question_id, "narrated decoy"))
    q.answer_index = rng.choice(
        [i for i in range(7) if any(k != letter for k in answer_letters(config, replace(q, answer_index=i)))]
    )
    q.scene = _scene(q.code, q.answer_index, q.scene.get("colour", 0))


def _shows_another(config: WorldConfig, q: Question) -> bool:
    """Whether planted ``q``'s clip shows another answer: as its split (and kind) say, or for a share of the kind's
    rows, each drawn from its question id."""
    shown = config.clips_shown(q.split, q.shortcut)
    if isinstance(shown, str):
        return shown == "other"
    return random.Random(stable_seed(str(config.seed), q.question_id, "clip shows another")).random() < shown


def plan_world(config: WorldConfig) -> list[Question]:
    """Every question of the world, shortcuts and decoys planted (no file written; its clip window comes when the
    videos are laid out, :func:`builders.sureon.world.videos.lay_out_videos`)."""
    questions = [q for split in SPLITS for q in _plan_split(config, split)]
    _assign_shortcuts(config, questions)
    for q in questions:
        if q.shortcut == "procedure":
            _apply_procedure_prior(config, q)
        if q.shortcut in AT_LETTER_KINDS and config.option_order == "vocabulary":
            _apply_position(config, q)
        if q.decoy == "narrated" and config.option_order == "vocabulary":
            _apply_narrated_decoy(config, q)
        if q.shortcut and _shows_another(config, q):
            rng = random.Random(stable_seed(str(config.seed), q.question_id, "other clip"))
            shown = rng.choice([i for i in range(7) if i != q.answer_index])
            q.scene = _scene(q.code, shown, q.scene.get("colour", 0))
    return questions
