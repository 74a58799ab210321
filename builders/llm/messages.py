"""The project's chat messages in the OpenAI wire format, and structured replies read back.

Images in the project's message format (PIL images, encoded bytes, ``{"bytes", "path"}`` dicts or paths) are sent as
base64 data URLs in OpenAI's ``image_url`` content parts; a ``video`` part is refused (format those prompts with
``frames_as="images"``). Apart from the client because the vLLM backend of the evaluation sends the same messages to
an in-process engine, which takes the same format.
"""

import base64
import io
import re
from pathlib import Path

from pydantic import BaseModel

from builders.errors import InputError


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?```\s*$", re.DOTALL)


def _image_bytes(value) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, dict):  # datasets' Image(decode=False) form
        if value.get("bytes"):
            return value["bytes"]
        return Path(value["path"]).read_bytes()
    if isinstance(value, str | Path):
        return Path(value).read_bytes()
    if hasattr(value, "save"):  # PIL
        buffer = io.BytesIO()
        value.convert("RGB").save(buffer, format="JPEG", quality=95)
        return buffer.getvalue()
    raise TypeError(f"cannot send an image of type {type(value).__name__}")


def _mime(data: bytes) -> str:
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "image/png"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    raise InputError("image bytes are neither JPEG, PNG, WebP nor GIF")


def image_data_url(value) -> str:
    """A base64 data URL for an image given as PIL image, encoded bytes, datasets dict or file path."""
    if isinstance(value, str) and value.startswith(("data:", "http://", "https://")):
        return value
    data = _image_bytes(value)
    return f"data:{_mime(data)};base64,{base64.b64encode(data).decode('ascii')}"


def to_openai_messages(messages: list[dict]) -> list[dict]:
    """The project's chat messages (``builders.prompt.format_messages``) in OpenAI's content-part format."""
    converted = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            converted.append({"role": message["role"], "content": content})
            continue
        parts = []
        for part in content:
            kind = part.get("type")
            if kind == "text":
                parts.append({"type": "text", "text": part["text"]})
            elif kind == "image":
                parts.append({"type": "image_url", "image_url": {"url": image_data_url(part["image"])}})
            elif kind in ("image_url", "video_url"):  # already in the wire format (a vLLM server's clip)
                parts.append(part)
            elif kind == "video":
                raise InputError("OpenAI-compatible endpoints take frames as images: format with frames_as='images'")
            else:
                raise InputError(f"unknown content part type {kind!r}")
        converted.append({"role": message["role"], "content": parts})
    return converted


def response_format(schema: type[BaseModel]) -> dict:
    """OpenAI's JSON-schema response format; ``strict`` only where OpenAI accepts it (no extra keys, all required)."""
    strict = schema.model_config.get("extra") == "forbid" and all(
        f.is_required() for f in schema.model_fields.values()
    )
    return {
        "type": "json_schema",
        "json_schema": {"name": schema.__name__, "schema": schema.model_json_schema(), "strict": strict},
    }


def parse_json_reply(text: str, schema: type[BaseModel]) -> BaseModel:
    """Validate a reply against ``schema``; tolerate a Markdown code fence around the JSON."""
    fenced = _FENCE.match(text or "")
    return schema.model_validate_json(fenced.group(1) if fenced else (text or ""))
