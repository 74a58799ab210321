"""Chat messages (from the one prompt formatter) -> what a processor takes, shared by training and inference so a
model sees exactly the same input in both: :func:`encode_prompts` is the one encoding of a prompt for the SFT
collator, the GRPO trainer and the evaluation's transformers backend (token ids, pixel values, grids, video metadata).

Frames travel inside the messages (``{"type": "image", "image": ...}``, or one ``{"type": "video", "video": frames,
"timestamps": [...]}``); these helpers take them out in order, leave placeholders for the chat template, and build
Qwen3-VL's video metadata. Frame timestamps are stored in seconds; Qwen3-VL writes each frame's time as
``frames_indices / fps``, so millisecond ticks make its ``<t seconds>`` markers the frames' real source times to
1 ms, whatever the source video's frame rate was.
"""

import io
from pathlib import Path

from builders.errors import InputError
from builders.prompt import evenly_spaced, is_frame_tag


TIMESTAMP_TICKS_PER_SECOND = 1000.0
# What a Qwen-VL processor returns for the frames, per image / per video (the grids say how many rows each owns).
VISUAL_KEYS = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw")


def video_metadata(timestamps: list[float]) -> dict:
    """Qwen3-VL video metadata for pre-sampled frames at ``timestamps`` (absolute seconds in the source video)."""
    indices = [round(t * TIMESTAMP_TICKS_PER_SECOND) for t in timestamps]
    return {"fps": TIMESTAMP_TICKS_PER_SECOND, "frames_indices": indices, "total_num_frames": max(indices) + 1}


def to_pil(image):
    """A PIL image from what a dataset row holds (PIL, encoded bytes, ``{"bytes", "path"}``, path)."""
    from PIL import Image

    if isinstance(image, Image.Image):
        return image.convert("RGB")
    if isinstance(image, dict):
        image = image.get("bytes") or image["path"]
    if isinstance(image, bytes | bytearray):
        image = io.BytesIO(image)
    elif isinstance(image, Path):
        image = str(image)
    return Image.open(image).convert("RGB")


def split_visuals(
    messages: list[dict], max_frames: int | None = None, load=to_pil
) -> tuple[list[dict], list, list[dict]]:
    """Take images and videos out of the messages (in order), leaving placeholders for the chat template.

    Returns ``(messages, images, videos)``; each video is ``{"frames", "timestamps"}``. ``max_frames`` caps a clip
    either way it is shown, with the same evenly spaced choice: a video keeps at most that many frames, and a
    message with more images keeps that many of them, each dropped image taking its ``Frame at`` tag with it.
    ``load`` turns each kept frame into what is returned: decoded by default; the length-grouped batches
    (``recipes.training.batching``) keep what the row stores, to read its size without decoding it.
    """
    images, videos, stripped = [], [], []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            parts = []
            for part in _cap_images(content, max_frames):
                if part.get("type") == "image":
                    images.append(load(part["image"]))
                    part = {"type": "image"}
                elif part.get("type") == "video":
                    keep = evenly_spaced(part["video"], max_frames)
                    frames = [load(part["video"][i]) for i in keep]
                    videos.append({"frames": frames, "timestamps": [part["timestamps"][i] for i in keep]})
                    part = {"type": "video"}
                parts.append(part)
            content = parts
        stripped.append({**message, "content": content})
    return stripped, images, videos


def _cap_images(content: list[dict], max_frames: int | None) -> list[dict]:
    """``content`` with at most ``max_frames`` image parts (evenly spaced), dropping each removed image's tag."""
    positions = [i for i, part in enumerate(content) if part.get("type") == "image"]
    keep = {positions[i] for i in evenly_spaced(positions, max_frames)}
    dropped = set(positions) - keep
    dropped |= {i - 1 for i in dropped if i > 0 and is_frame_tag(content[i - 1])}
    return [part for i, part in enumerate(content) if i not in dropped]


def flatten_text(messages: list[dict]) -> list[dict]:
    """Content-part lists -> plain strings (parts carry their own separators), for text-only chat templates."""
    flat = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            if any(part.get("type") != "text" for part in content):
                raise InputError("a text-only model got frames: train or evaluate it blind")
            content = "".join(part["text"] for part in content)
        flat.append({**message, "content": content})
    return flat


def media_kwargs(images: list, videos: list[dict]) -> dict:
    """Processor keyword arguments for the frames: no re-sampling, real timestamps, Qwen's per-frame pixel cap.
    ``images`` is one prompt's images, or a batch's as one list per prompt."""
    kwargs = {}
    if images:
        kwargs["images"] = images
    if videos:
        kwargs["videos"] = [video["frames"] for video in videos]
        kwargs["video_metadata"] = [video_metadata(video["timestamps"]) for video in videos]
        kwargs["do_sample_frames"] = False
    return kwargs


def processor_inputs(processor, conversations: list[list[dict]], images: list[list], videos: list[dict]):
    """Rendered prompts + their frames through the processor (``BatchFeature``, padded on the tokenizer's side):
    ``conversations`` with placeholders (:func:`split_visuals`), ``images`` one list per conversation, ``videos`` all
    of the batch's in order. No special tokens are added (the chat template writes them); Qwen3-VL's video processor
    caps pixels per frame, as qwen-vl-utils did when Qwen3-VL was trained. A text-only tokenizer gets the flattened
    text."""
    from recipes.model_io.modeling import tokenizer_of

    texts = [prompt_text(processor, c) for c in conversations]
    if processor is tokenizer_of(processor):
        return processor(texts, padding=True, return_tensors="pt", add_special_tokens=False)
    kwargs = media_kwargs(images if any(images) else [], videos)
    if videos and caps_pixels_per_frame(processor):
        kwargs["cap_pixels_per_frame"] = True
    return processor(text=texts, padding=True, return_tensors="pt", add_special_tokens=False, **kwargs)


def prompt_text(processor, messages: list[dict]) -> str:
    """The generation prompt's text for one conversation with placeholders (:func:`split_visuals`), as every
    encoding of it renders it (:func:`processor_inputs`, and vLLM's offline backend, which hands this text to the
    engine): a text-only tokenizer gets the flattened text."""
    from recipes.model_io.modeling import tokenizer_of

    if processor is tokenizer_of(processor):
        messages = flatten_text(messages)
    return render_chat(processor, messages, add_generation_prompt=True)


def caps_pixels_per_frame(processor) -> bool:
    """Whether the processor's video processor takes ``cap_pixels_per_frame`` (Qwen3-VL's), which every encoding of
    a clip turns on: each frame's pixels capped as qwen-vl-utils capped them when Qwen3-VL was trained."""
    return hasattr(type(processor.video_processor), "cap_pixels_per_frame")


def encode_prompts(processor, conversations: list[list[dict]], max_frames: int | None = None):
    """The one encoding of chat prompts with their frames (at most ``max_frames`` per clip, :func:`split_visuals`).

    Images stay grouped by prompt because some processors check each prompt's image placeholders against that
    prompt's own images (Gemma 3 and 4 raise on a flat list once a batch mixes visual and blind prompts), and
    LLaVA-OneVision reads a flat list as prompts of one image each (tiling every frame); Qwen-VL, InternVL and Molmo2
    flatten the nested list themselves."""
    stripped, images, videos = [], [], []
    for conversation in conversations:
        messages, conversation_images, conversation_videos = split_visuals(conversation, max_frames)
        stripped.append(messages)
        images.append(conversation_images)
        videos += conversation_videos
    return processor_inputs(processor, stripped, images, videos)


def render_chat(processor, messages: list[dict], *, add_generation_prompt: bool) -> str:
    """The chat template's text for ``messages``, with a video placeholder the processor can expand.

    A system message reaches every model: where the template has no system role (it raises on one, as Molmo2's
    does, or renders the conversation without it), the system text opens the first user turn, followed by a blank
    line, which is how templates that do fold it in place it (Gemma 3's).

    Qwen3-VL's processor writes every frame as ``<t seconds><|vision_start|>pads<|vision_end|>`` itself, so a chat
    template that also wraps the video placeholder in vision markers (as Qwen2.5-VL-style templates do) would nest
    them; the wrapped placeholder is collapsed to the bare video token for such processors. [Whether the published
    Qwen3-VL template wraps it under this transformers version could not be checked offline; this keeps either
    form correct.]
    """
    from jinja2.exceptions import TemplateError

    system = _system_text(messages)
    try:
        text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt)
    except TemplateError:
        if system is None:
            raise
        text = None
    if system is not None and (text is None or system not in text):
        text = processor.apply_chat_template(
            merge_system_into_first_user(messages), tokenize=False, add_generation_prompt=add_generation_prompt
        )
    if _expands_frames_itself(processor):
        wrapped = f"{processor.vision_start_token}{processor.video_token}{processor.vision_end_token}"
        text = text.replace(wrapped, processor.video_token)
    return text


def _system_text(messages: list[dict]) -> str | None:
    if not messages or messages[0]["role"] != "system":
        return None
    content = messages[0]["content"]
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content)
    return text.strip() or None


def merge_system_into_first_user(messages: list[dict]) -> list[dict]:
    """``messages`` without the system message, its text (and a blank line) opening the first user turn."""
    system, rest = _system_text(messages), list(messages[1:])
    for i, message in enumerate(rest):
        if message["role"] == "user":
            content = message["content"]
            if isinstance(content, str):
                content = f"{system}\n\n{content}"
            else:
                content = [{"type": "text", "text": f"{system}\n\n"}, *content]
            rest[i] = {**message, "content": content}
            return rest
    raise InputError("a system prompt needs a user turn to be merged into")


def _expands_frames_itself(processor) -> bool:
    return type(processor).__name__.startswith("Qwen3VL") and all(
        getattr(processor, name, None) for name in ("vision_start_token", "vision_end_token", "video_token")
    )
