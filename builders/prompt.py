"""The project's one prompt formatter: a video-QA record -> chat messages, for training, evaluation and guessers.

Layout (the Sureon paper's D.1 and Fig. 17): the clip's time range, each frame tagged with its absolute timestamp, then
the question and the lettered options. The blind variant is exactly the same text without the frames (nor their tags),
so visual and blind passes differ only in the visual input. Option order is the record's (fixed at build time).

Chat templates join content parts without separators, so each part after the header starts with its own newline:
the rendered blind prompt reads ``Clip: ...\nQuestion: ...``. ``frames_as="images"`` interleaves each frame as an
image after a ``Frame at HH:MM:SS.ss`` tag (any VLM or OpenAI-compatible endpoint); ``frames_as="video"`` passes the
frames as one video block carrying its timestamps, for processors such as Qwen3-VL's that insert their own time
markers from the video metadata. A text-only record (no ``start``, e.g. a SurgiQ question audited blind) has no clip
header: its prompt is the question text alone, and an image record (one frame, no ``start``: the public corpus's
image branch) shows its image without a time tag.

One frame rule: ``max_frames`` means the same everywhere a clip is shown (SFT, GRPO, evaluation, the exports): at
most that many of the frames the build stored, chosen by :func:`evenly_spaced` (first and last kept), each keeping
its own timestamp. A build stores up to ``PROTOCOL_FRAMES`` frames per clip (the Sureon paper's D.1: up to 8, at least
4, sampled when the benchmark is built); a run shown fewer is off the benchmark's protocol, and says so
(:func:`frame_protocol`). Curation's guessers are blind: they see no frame at all.
"""

from builders.errors import InputError
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
# The benchmark's protocol: the Sureon paper sends up to 8 frames per clip (D.1); ``sureon build sureon`` stores that
# many.
PROTOCOL_FRAMES = 8


def evenly_spaced(items: list, limit: int | None) -> list[int]:
    """Indices of at most ``limit`` items spread over the whole list (first and last kept): the one choice of a
    clip's frames under ``max_frames``, in training, GRPO, evaluation and the exports."""
    if not limit or len(items) <= limit:
        return list(range(len(items)))
    if limit == 1:
        return [0]
    return [round(i * (len(items) - 1) / (limit - 1)) for i in range(limit)]


def select_frames(record: dict, max_frames: int | None) -> dict:
    """``record`` with at most ``max_frames`` of its frames (and their timestamps), chosen by :func:`evenly_spaced`."""
    frames = list(record.get("frames") or [])
    if not max_frames or len(frames) <= max_frames:
        return record
    keep = evenly_spaced(frames, max_frames)
    timestamps = list(record.get("frame_timestamps") or [])
    if len(timestamps) != len(frames):
        raise InputError(f"{record.get('question_id')}: {len(frames)} frames but {len(timestamps)} timestamps")
    return {**record, "frames": [frames[i] for i in keep], "frame_timestamps": [timestamps[i] for i in keep]}


def frame_protocol(max_frames: int | None, stored_frames: int) -> dict:
    """What a run showed of each clip against the benchmark's protocol: ``{"max_frames", "stored_frames",
    "frames_shown", "protocol_frames", "at_protocol"}``. ``stored_frames`` is the most frames a clip of the data
    holds; a run is at the protocol when it shows as many as the protocol allows of them (a build made with fewer,
    ``sureon build sureon --max-frames 4``, cannot be told apart from short clips here: its build options say so).
    """
    shown = min(max_frames, stored_frames) if max_frames else stored_frames
    return {
        "max_frames": max_frames,
        "stored_frames": stored_frames,
        "frames_shown": shown,
        "protocol_frames": PROTOCOL_FRAMES,
        "at_protocol": shown == min(stored_frames, PROTOCOL_FRAMES),
    }


def protocol_label(protocol: dict | None) -> str:
    """``""`` at the protocol, else a note for reports: ``" (4 frames, not the 8-frame protocol)"``."""
    if not protocol or protocol.get("at_protocol", True):
        return ""
    return f" ({protocol['frames_shown']} frames, not the {protocol['protocol_frames']}-frame protocol)"


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
        raise InputError(
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
    max_frames: int | None = None,
) -> list[dict]:
    """Chat messages for one record. ``record["frames"]`` may hold PIL images, bytes or paths; it is passed through,
    at most ``max_frames`` of them (:func:`select_frames`)."""
    if frames_as not in ("images", "video"):
        raise InputError(f"frames_as must be 'images' or 'video', got {frames_as!r}")
    record = select_frames(record, max_frames) if not blind else record
    has_clip = record.get("start") is not None
    content: list[dict] = [{"type": "text", "text": clip_header(record)}] if has_clip else []
    frames = [] if blind else list(record.get("frames") or [])
    timestamps = list(record.get("frame_timestamps") or []) if frames else []
    if len(timestamps) != len(frames):
        raise InputError(f"{record.get('question_id')}: {len(frames)} frames but {len(timestamps)} timestamps")
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
