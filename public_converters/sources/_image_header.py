"""Image sizes from file headers, for readers that must state a mask's expected size without decoding pixels."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from public_converters.schema import SourceError


def image_size(path: Path) -> tuple[int, int]:
    """(height, width) from the header only; the media check decodes every image in full later."""
    try:
        with Image.open(path) as image:
            return image.size[1], image.size[0]
    except FileNotFoundError as error:
        raise SourceError(path, "file not found") from error
    except OSError as error:
        raise SourceError(path, f"not a readable image ({error})", fix="re-download or re-extract it") from error
