"""The project's one prompt formatter: a video-QA record -> chat messages, for training, evaluation and guessers.

Layout (the seed's D.1 and Fig. 17): the clip's time range, each frame tagged with its absolute timestamp, then the
question and the lettered options. The blind variant is exactly the same text without the frames (nor their tags),
so visual and blind passes differ only in the visual input. Option order is the record's (fixed at build time).

Chat templates join content parts without separators, so each part after the header starts with its own newline:
the rendered blind prompt reads ``Clip: ...\nQuestion: ...``. ``frames_as="images"`` interleaves each frame as an
image after a ``Frame at HH:MM:SS.ss`` tag (any VLM or OpenAI-compatible endpoint); ``frames_as="video"`` passes the
frames as one video block carrying its timestamps, for processors such as Qwen3-VL's that insert their own time
markers from the video metadata. A text-only record (no ``start``, e.g. a SurgiQ question audited blind) has no clip
header: its prompt is the question text alone, and an image record (one frame, no ``start``: the public corpus's
image branch) shows its image without a time tag.
"""

from builders.options import LETTERS
from builders.sureon.categories import MCQ, ORDERING
from builders.sureon.clips import format_clock


INSTRUCTIONS = {
    MCQ: "Answer with the letter of the correct option.",
    ORDERING: "Answer with the event letters in chronological order, separated by commas.",
    "SM": "Answer with the sequence of surgical steps shown in the clip, in order.",
    "open": "Answer in one or two sentences.",
    "json": "Answer with the JSON only.",
}


FRAME_TAG_PREFIX = "\nFrame at "


def frame_tag(timestamp: float) -> str:
    """The text part written before each frame shown as an image (``frames_as="images"``)."""
    return f"{FRAME_TAG_PREFIX}{format_clock(timestamp)}: "


def is_frame_tag(part: dict) -> bool:
    """Whether a content part is a frame's tag (it goes wherever its frame goes, e.g. when frames are capped)."""
    return part.get("type") == "text" and str(part.get("text", "")).startswith(FRAME_TAG_PREFIX)


def clip_header(record: dict) -> str:
    return f"Clip: {format_clock(record['start'])} to {format_clock(record['end'])} of the source video."


def question_text(record: dict) -> str:
    """Question, lettered options and the answer instruction: the text shared by visual and blind prompts."""
    options = record.get("options") or []
    if len(options) > len(LETTERS):
        raise ValueError(
            f"{record.get('question_id')}: {len(options)} options, at most {len(LETTERS)} can be lettered"
        )
    lines = [f"Question: {record['question'].strip()}"]
    if options:
        lines.append("Options:")
        lines += [f"{LETTERS[i]}. {str(option).strip()}" for i, option in enumerate(options)]
    answer_format = record.get("answer_format") or (MCQ if options else "open")
    if options:
        instruction = INSTRUCTIONS[MCQ]
    elif answer_format in (ORDERING, "json"):
        instruction = INSTRUCTIONS[answer_format]
    else:
        instruction = INSTRUCTIONS["SM" if record.get("category") == "SM" else "open"]
    lines.append(instruction)
    return "\n".join(lines)


def answer_target(record: dict) -> str:
    """The assistant answer used for training and scoring: a letter, a letter order, or the free text."""
    if record.get("options"):
        return LETTERS[record["answer_index"]]
    if record.get("answer_order"):
        return ",".join(record["answer_order"])
    return str(record["answer"]).strip()


def format_messages(
    record: dict,
    *,
    blind: bool = False,
    frames_as: str = "images",
    with_answer: bool = False,
    system_prompt: str | None = None,
) -> list[dict]:
    """Chat messages for one record. ``record["frames"]`` may hold PIL images, bytes or paths; it is passed through."""
    if frames_as not in ("images", "video"):
        raise ValueError(f"frames_as must be 'images' or 'video', got {frames_as!r}")
    has_clip = record.get("start") is not None
    content: list[dict] = [{"type": "text", "text": clip_header(record)}] if has_clip else []
    frames = [] if blind else list(record.get("frames") or [])
    timestamps = list(record.get("frame_timestamps") or []) if frames else []
    if len(timestamps) != len(frames):
        raise ValueError(f"{record.get('question_id')}: {len(frames)} frames but {len(timestamps)} timestamps")
    if frames and frames_as == "video" and has_clip:
        content.append({"type": "video", "video": frames, "timestamps": timestamps})
    elif has_clip:
        for frame, timestamp in zip(frames, timestamps, strict=True):
            content.append({"type": "text", "text": frame_tag(timestamp)})
            content.append({"type": "image", "image": frame})
    else:
        content += [{"type": "image", "image": frame} for frame in frames]
    separator = "\n" if has_clip or frames else ""
    content.append({"type": "text", "text": separator + question_text(record)})
    messages = [{"role": "system", "content": [{"type": "text", "text": system_prompt}]}] if system_prompt else []
    messages.append({"role": "user", "content": content})
    if with_answer:
        messages.append({"role": "assistant", "content": [{"type": "text", "text": answer_target(record)}]})
    return messages


# SurgiQ: text-only four-option MCQs, scored by the next-token log-probability of the option letter after the answer
# cue (the paper's 4.2). The wording of its evaluation prompt (Appendix Figure A7) is not in the text we have; this is
# the fixed MMLU-style template it describes: an instruction, the question, lettered options, then the cue. Few-shot
# demonstrations repeat the same block with their answer letter after the cue.
SURGIQ_INSTRUCTION = "The following is a multiple-choice question about surgery. Choose the single best answer."
ANSWER_CUE = "Answer:"


def mcq_block(record: dict, *, with_answer: bool = False) -> str:
    """Question, lettered options and the answer cue (followed by `` X`` for a demonstration)."""
    lines = [f"Question: {record['question'].strip()}"]
    lines += [f"{LETTERS[i]}. {str(option).strip()}" for i, option in enumerate(record["options"])]
    lines.append(f"{ANSWER_CUE} {LETTERS[record['answer_index']]}" if with_answer else ANSWER_CUE)
    return "\n".join(lines)


def surgiq_prompt(record: dict, demonstrations: list[dict] = ()) -> str:
    """The SurgiQ evaluation prompt; it ends with the answer cue, so the next token is the answer letter."""
    blocks = [SURGIQ_INSTRUCTION, *(mcq_block(d, with_answer=True) for d in demonstrations), mcq_block(record)]
    return "\n\n".join(blocks)
