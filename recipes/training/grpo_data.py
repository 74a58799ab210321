"""GRPO prompts: mixture rows -> the rows TRL's ``GRPOTrainer`` samples from, rendered as evaluation shows them.

Each row is ``{"prompt", "visuals", <reference columns>}``: the prompt is the one prompt formatter's messages
(``builders.prompt`` via ``recipes.training.mixture.to_example``), its frames taken out in order by
``recipes.model_io.chat_inputs.split_visuals`` (the SFT collator's and the evaluation's helper, with the same
``max_frames`` choice of frames), leaving ``{"type": "image"}`` / ``{"type": "video"}`` placeholders; the frames go in
``visuals`` (``{"images": [...], "videos": [{"frames", "timestamps"}]}``), which
``recipes.training.grpo_trainer.VisualGRPOTrainer`` encodes exactly as SFT and evaluation do. The reference answer
stays out of the prompt, in the columns TRL hands every reward function as keyword lists (``REFERENCE_COLUMNS``;
``recipes.training.rewards`` reads them).

A clip's frames go in as one video (``frames_as: video``: Qwen3-VL's timestamps and temporal patches, what SFT
trains on and ``sureon eval sureon`` shows by default) or as tagged images (``frames_as: images``); image rows of
the public corpus and text-only rows mix with either. Rows are rendered when a batch is drawn (a ``datasets``
transform over the mixture's index table), so frames stay in the memory-mapped Arrow files as in SFT. A row no
reward can check (an open-ended answer: summaries, templated free text) teaches nothing under verifiable rewards:
such rows are left out and counted per source (``rows_checkable`` next to ``rows_used``), never dropped silently.

Each checkable row has an answer kind (:func:`answer_kind`, one of :data:`recipes.training.arguments.ANSWER_KINDS`):
``letter`` (lettered options), ``order`` (an event order) or the grounded JSON shape (``label``, ``boxes``,
``window``, ...). A recipe's
``completion_budgets`` give each kind the most new tokens a completion may take; :func:`check_completion_budgets`
refuses, before the run claims its folder, a budget some row's reference answer (plus the end-of-turn) does not fit.
"""

from dataclasses import dataclass
from typing import Any

from builders.errors import InputError
from builders.hub import resolve_frames
from builders.prompt import answer_target
from builders.sureon.categories import ORDERING
from public_converters.templating import GROUNDED
from recipes.model_io.chat_inputs import flatten_text, split_visuals
from recipes.training.mixture import LoadedSource, to_example


VISUALS_COLUMN = "visuals"  # a row's frames: {"images": [PIL], "videos": [{"frames", "timestamps"}]}
# What every reward function receives, one list entry per completion (None where a row has no such field).
REFERENCE_COLUMNS = (
    "question_id",
    "question",
    "options",
    "answer",  # the target: builders.prompt.answer_target (a letter, "B,C,A", or the grounded JSON)
    "answer_order",
    "answer_format",
    "answer_shape",  # grounded JSON shape (public_converters.grounded), None for letters, orders and free text
    "answer_key",  # the JSON key of a "label" shape (phase, step, action)
)


def grounded_shape(row: dict) -> tuple[str | None, str | None]:
    """``(shape, key)`` of a grounded answer: a benchmark row's ``answer_shape``, or its template's (the corpus)."""
    if row.get("answer_shape"):
        return row["answer_shape"], row.get("answer_key")
    if row.get("grounded") and row.get("template_id") in GROUNDED:
        shape, _, key = GROUNDED[row["template_id"]]
        return shape, key
    return None, None


def is_checkable(row: dict) -> bool:
    """Whether a verifiable reward applies: lettered options, an event order, or grounded JSON."""
    return bool(row.get("options") or row.get("answer_order") or grounded_shape(row)[0])


def answer_kind(row: dict) -> str:
    """The answer kind of a checkable row (a mixture row or a GRPO row): ``letter``, ``order`` or its grounded shape.
    A row no reward can check (:func:`is_checkable` false) has none: a ``ValueError``."""
    if row.get("options"):
        return "letter"
    if row.get("answer_order"):
        return "order"
    shape = grounded_shape(row)[0]
    if shape is None:
        raise InputError(f"{row.get('question_id') or row.get('qa_id')}: no checkable answer, so no answer kind")
    return shape


def reference_columns(row: dict, target: str) -> dict:
    shape, key = grounded_shape(row)
    return {
        "question_id": str(row.get("question_id") or row.get("qa_id") or ""),
        "question": row.get("question"),
        "options": list(row.get("options") or []) or None,
        "answer": target,
        "answer_order": list(row.get("answer_order") or []) or None,
        "answer_format": row.get("answer_format") or (ORDERING if row.get("answer_order") else None),
        "answer_shape": shape,
        "answer_key": key,
    }


_SCREEN_COLUMNS = ("options", "answer_order", "grounded", "template_id", "answer_shape", "answer_key")
_ANSWER_COLUMNS = ("answer", "answer_index")  # what answer_target reads besides the screen's columns


def small_columns(item: LoadedSource, columns: tuple[str, ...]) -> list[dict]:
    """Every row of a source with only ``columns`` (those it has): read without decoding a frame."""
    dataset = item.dataset
    present = [column for column in columns if column in dataset.column_names]
    table = dataset.select_columns(present).to_dict() if present else {}
    return [{c: table[c][i] for c in present} for i in range(len(dataset))]


def checkable_rows(item: LoadedSource) -> list[bool]:
    """``is_checkable`` of every row of a source, read from its small columns only (no frames decoded)."""
    return [is_checkable(row) for row in small_columns(item, _SCREEN_COLUMNS)]


def longest_references(loaded: list[LoadedSource], index, tokenizer) -> dict[str, tuple[int, str]]:
    """``{kind: (tokens, where)}``: for each answer kind among the checkable rows of the mixture's ``index``, the
    tokens its longest reference answer needs in a completion (the answer's own, by ``tokenizer``, and the
    end-of-turn that ends it) and which row that is (``SOURCE row N``); read from the small columns only."""
    drawn: dict[int, set[int]] = {}  # source -> the rows the index draws from it
    for source, row in zip(index["source"], index["row"], strict=True):
        drawn.setdefault(source, set()).add(row)
    longest: dict[str, tuple[int, str]] = {}
    for number, rows in sorted(drawn.items()):
        item = loaded[number]
        table = small_columns(item, _SCREEN_COLUMNS + _ANSWER_COLUMNS)
        picked = [(r, answer_kind(table[r])) for r in sorted(rows) if is_checkable(table[r])]
        targets = [answer_target(table[r]) for r, _ in picked]
        encoded = tokenizer(targets, add_special_tokens=False)["input_ids"] if targets else []
        for (r, kind), ids in zip(picked, encoded, strict=True):
            needed = len(ids) + 1
            if needed > longest.get(kind, (0, ""))[0]:
                longest[kind] = (needed, f"{item.source.label} row {r}")
    return longest


def check_completion_budgets(
    loaded: list[LoadedSource], index, tokenizer, budgets: dict[str, int] | None, max_completion_length: int | None
) -> None:
    """Refuse, in one line, ``completion_budgets`` that cut a reference answer short: for every checkable row of the
    mixture's ``index`` whose kind has a budget, its reference answer's tokens plus the end-of-turn must fit the
    budget (else no completion of that row could ever be right), and no budget may exceed ``max_completion_length``
    (still every completion's cap). Kinds without a budget keep TRL's bound, ``max_completion_length``."""
    if not budgets:
        return
    problems = [
        f"{kind}: {budget} is above max_completion_length ({max_completion_length}), which stays every "
        "completion's cap: lower the budget or raise max_completion_length"
        for kind, budget in budgets.items()
        if max_completion_length is not None and budget > max_completion_length
    ]
    for kind, (needed, where) in sorted(longest_references(loaded, index, tokenizer).items()):
        if kind in budgets and needed > budgets[kind]:
            problems.append(
                f"{kind}: {budgets[kind]} tokens cannot hold the reference answer of {where} ({needed - 1} tokens "
                f"and the end-of-turn): raise it to at least {needed}, or leave {kind} out to allow "
                "max_completion_length"
            )
    if problems:
        raise InputError("completion_budgets: " + "; ".join(problems))


def grpo_row(
    row: dict,
    fmt: str = "video_qa",
    *,
    frames_as: str = "video",
    max_frames: int | None = 8,
    system_prompt: str | None = None,
    vision_language: bool = True,
) -> dict[str, Any]:
    """One mixture row (frames resolved) -> the GRPO row the trainer draws: ``prompt``, ``visuals``, references."""
    example = to_example(row, fmt, blind=not vision_language, frames_as=frames_as, system_prompt=system_prompt)
    messages, images, videos = split_visuals(example.prompt, max_frames)
    if not vision_language:
        messages = flatten_text(messages)
    rendered = {"prompt": messages, **reference_columns(row, example.target)}
    if vision_language:
        rendered[VISUALS_COLUMN] = {"images": images, "videos": videos}
    return rendered


@dataclass
class PromptRenderer:
    """The ``datasets`` transform: index rows ``{"source", "row"}`` -> GRPO rows (a class: workers pickle it)."""

    sources: list[LoadedSource]
    frames_as: str = "video"
    max_frames: int | None = 8
    system_prompt: str | None = None
    vision_language: bool = True

    def render(self, source: int, row_number: int) -> dict[str, Any]:
        item = self.sources[source]
        try:
            return grpo_row(
                resolve_frames(item.dataset[row_number], item.media_root),
                item.format,
                frames_as=self.frames_as,
                max_frames=self.max_frames,
                system_prompt=self.system_prompt,
                vision_language=self.vision_language,
            )
        except (KeyError, ValueError) as err:
            raise InputError(f"{item.source.label} row {row_number}: {err}") from err

    def __call__(self, batch: dict[str, list]) -> dict[str, list]:
        rows = [self.render(s, r) for s, r in zip(batch["source"], batch["row"], strict=True)]
        return {key: [row[key] for row in rows] for key in rows[0]}


def grpo_dataset(
    loaded: list[LoadedSource],
    index,
    *,
    frames_as: str = "video",
    max_frames: int | None = 8,
    system_prompt: str | None = None,
    vision_language: bool = True,
):
    """``(dataset, rows_checkable per source)``: the checkable rows of the mixture's ``index``, rendered on access
    (clips as one video or as tagged images: ``frames_as``)."""
    if frames_as not in ("video", "images"):
        raise InputError(f"frames_as: {frames_as!r}: choose video (one video per clip) or images (tagged frames)")
    not_video_qa = [item.source.label for item in loaded if item.format != "video_qa"]
    if not_video_qa:
        raise InputError(
            f"sources {not_video_qa}: GRPO needs rows with a checkable reference (options, an event order or grounded "
            "JSON): use video-QA builds (sureon build sureon / public), not messages or prompt/completion files"
        )
    checkable = [checkable_rows(item) for item in loaded]
    sources, rows = index["source"], index["row"]
    keep = [i for i, (s, r) in enumerate(zip(sources, rows, strict=True)) if checkable[s][r]]
    counts = [0] * len(loaded)
    for i in keep:
        counts[sources[i]] += 1
    if not keep:
        raise InputError(
            "no row of the mixture has a checkable answer (options, an event order or grounded JSON) for GRPO"
        )
    renderer = PromptRenderer(loaded, frames_as, max_frames, system_prompt, vision_language)
    return index.select(keep).with_transform(renderer), counts
