"""The generation cache and batched generation every backend goes through, so a killed evaluation resumes.

Generations are cached per (model, question_id, mode) in an append-only JSONL file, each entry stamped with a
fingerprint of the prompt (text, frame bytes, timestamps), the generation settings (request fields included) and the
checkpoint's files (name, size, mtime): a changed prompt, setting or checkpoint regenerates, anything else is reused.
An entry also keeps the reasoning and token usage an endpoint returned, so a resumed run reports them too. Apart from
the backends because it is the same for all of them (a backend only says what it generates and with which settings),
and blind curation fingerprints its prompts with :func:`prompt_fingerprint` too. :func:`choose_frames_as` is the one
reading of ``--frames-as`` for the backends that load a checkpoint's processor (transformers, vLLM).
"""

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from builders.errors import InputError
from builders.jsonl_log import AppendOnlyJsonl


def weights_identity(name_or_path: str) -> list | str:
    """What tells two checkpoints at one local path apart without reading them: each weight and config file's name,
    size and modification time. A Hub id is identified by its name (pin ``--revision`` for a fixed snapshot)."""
    path = Path(name_or_path)
    if not path.is_dir():
        return name_or_path
    files = sorted(p for p in path.iterdir() if p.suffix in (".safetensors", ".bin", ".json", ".jinja"))
    return [(p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files]


def choose_frames_as(processor, frames_as: str, model: str) -> str:
    """How a clip reaches ``model`` whose processor is ``processor``: ``auto`` is one video (its frames' timestamps and
    Qwen3-VL's temporal positions, as SFT and GRPO encode it) where the processor has a video processor, else
    images; a choice the processor cannot take is one line naming the other."""
    if frames_as not in ("auto", "video", "images"):
        raise InputError(f"frames_as {frames_as!r}: choose auto, video or images")
    has_images = getattr(processor, "image_processor", None) is not None
    has_video = getattr(processor, "video_processor", None) is not None
    if frames_as == "auto":
        return "video" if has_video else "images"
    if frames_as == "video" and not has_video:
        raise InputError(f"{model}: its processor has no video processor; use --frames-as images")
    if frames_as == "images" and has_video and not has_images:
        raise InputError(f"{model}: its processor takes video only (no image processor); use --frames-as video")
    return frames_as


def _image_digest(image) -> str:
    if isinstance(image, dict):
        data = image.get("bytes") or Path(image["path"]).read_bytes()
    elif isinstance(image, bytes | bytearray):
        data = bytes(image)
    elif isinstance(image, str | Path):
        data = Path(image).read_bytes()
    else:  # PIL
        data = image.tobytes() + repr((image.mode, image.size)).encode()
    return hashlib.sha256(data).hexdigest()


def prompt_fingerprint(messages: list[dict], settings: dict) -> str:
    """A hash of everything that determines a generation: the messages (frames by content) and the settings."""
    digest = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode())
    for message in messages:
        digest.update(f"\x1e{message['role']}".encode())
        content = message["content"]
        for part in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if part["type"] == "text":
                digest.update(f"\x1ft:{part['text']}".encode())
            elif part["type"] == "image":
                digest.update(f"\x1fi:{_image_digest(part['image'])}".encode())
            elif part["type"] == "video":
                frames = ",".join(_image_digest(frame) for frame in part["video"])
                digest.update(f"\x1fv:{frames}@{json.dumps(part.get('timestamps'))}".encode())
    return digest.hexdigest()


class GenerationCache(AppendOnlyJsonl):
    """Generations keyed by (model, question_id, mode), each stamped with its prompt fingerprint."""

    def __init__(self, path: str | Path):
        super().__init__(
            path, key=lambda entry: (entry["model"], entry["question_id"], entry["mode"]), kind="generations"
        )

    def get(self, model: str, question_id: str, mode: str, fingerprint: str) -> str | None:
        entry = self.lookup(model, question_id, mode, fingerprint)
        return entry["output"] if entry is not None else None

    def lookup(self, model: str, question_id: str, mode: str, fingerprint: str) -> dict | None:
        """The whole cached entry (output, and reasoning / usage where the backend returned them), if current."""
        entry = self.entries.get((model, question_id, mode))
        return entry if entry is not None and entry["fingerprint"] == fingerprint else None


@dataclass(frozen=True)
class Generated:
    """One generation and what an endpoint returns beside it: its separate reasoning field and its token usage."""

    text: str | None
    reasoning: str | None = None
    usage: dict | None = None


@dataclass
class GenerationItem:
    question_id: str
    mode: str  # "visual" | "blind"
    messages: list[dict]


@dataclass
class GenerationStats:
    generated: int = 0
    cached: int = 0
    failed: int = 0


def _generate(backend, conversations: list[list[dict]]) -> list[Generated]:
    """A batch's generations; a backend that returns more than the text (an endpoint's reasoning and usage) says so
    with ``generate_detailed``."""
    detailed = getattr(backend, "generate_detailed", None)
    if detailed is not None:
        return detailed(conversations)
    return [Generated(text) for text in backend.generate(conversations)]


def generate_cached(
    backend,
    model: str,
    items: list[GenerationItem],
    cache: GenerationCache,
    stats: GenerationStats,
    details: dict | None = None,
) -> dict[tuple[str, str], str | None]:
    """Outputs for ``items`` keyed by (question_id, mode): cached ones reused, the rest generated in batches, each
    batch cached as soon as it is done. A failed generation (endpoint gave up) is ``None`` and not cached.

    ``details``, when given, receives ``{"reasoning", "usage"}`` per (question_id, mode) whose backend returned them.
    """
    settings = backend.settings()
    outputs: dict[tuple[str, str], str | None] = {}
    pending: list[tuple[GenerationItem, str]] = []
    for item in items:
        fingerprint = prompt_fingerprint(item.messages, settings)
        cached = cache.lookup(model, item.question_id, item.mode, fingerprint)
        if cached is None:
            pending.append((item, fingerprint))
        else:
            outputs[(item.question_id, item.mode)] = cached["output"]
            _record_details(details, item, cached.get("reasoning"), cached.get("usage"))
            stats.cached += 1
    for start in range(0, len(pending), backend.batch_size):
        batch = pending[start : start + backend.batch_size]
        generated = _generate(backend, [item.messages for item, _ in batch])
        done = []
        for (item, fingerprint), result in zip(batch, generated, strict=True):
            outputs[(item.question_id, item.mode)] = result.text
            if result.text is None:
                stats.failed += 1
                continue
            stats.generated += 1
            _record_details(details, item, result.reasoning, result.usage)
            entry = {"model": model, "question_id": item.question_id, "mode": item.mode, "fingerprint": fingerprint}
            entry["output"] = result.text
            entry |= {k: v for k, v in (("reasoning", result.reasoning), ("usage", result.usage)) if v is not None}
            done.append(entry)
        cache.add(done)
    return outputs


def _record_details(details: dict | None, item: GenerationItem, reasoning: str | None, usage: dict | None) -> None:
    if details is not None and (reasoning is not None or usage is not None):
        details[(item.question_id, item.mode)] = {"reasoning": reasoning, "usage": usage}


def usage_totals(details: Iterable[dict]) -> dict | None:
    """Replies and tokens (prompt, completion, reasoning where reported) summed over generations' usage; ``None``
    when no generation reported usage (a local backend)."""
    from builders.llm import ModelUsage

    reported = [d["usage"] for d in details if d.get("usage") is not None]
    if not reported:
        return None
    totals = ModelUsage()
    for usage in reported:
        totals.add(usage)
    return {k: v for k, v in asdict(totals).items() if k != "cached"}


def chunks(items: Iterable, size: int):
    batch = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
