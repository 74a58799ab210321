"""Helpers shared by image-branch readers whose frame size is not written in any annotation file."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from public_converters.schema import SourceError


def header_size(path: Path) -> tuple[int, int]:
    """(width, height) from an image's header, without decoding its pixels (the media check decodes them later).

    Readers use it to state the size every frame and class mask of a video must have, so a mask of the wrong size
    is an error that names the mask rather than a silently misplaced box."""
    try:
        with Image.open(path) as image:
            return image.size
    except FileNotFoundError as error:
        raise SourceError(path, "file not found", fix="check the source folder is complete") from error
    except (OSError, SyntaxError, ValueError) as error:
        raise SourceError(path, f"cannot read the image header ({error})", fix="re-download this file") from error
