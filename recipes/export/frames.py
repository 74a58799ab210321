"""How every export places a build's frames where another tool reads them: one store for ``sft``, ``vlmevalkit`` and
``lmms_eval``.

A build holds its frames either as files (a public build's ``media/``, a ``files``-layout config: paths relative to
the build) or embedded as image bytes. Files are referenced where they lie, resolved against the build's media root
(:func:`builders.hub.resolve_frames`: a missing file is an error naming the row), never copied. Embedded frames are
written once each, byte for byte (never re-encoded), under the export's frame folder and named by their content hash
(``ab/abcdef....jpg``, the extension that of the image's own format): a frame several questions (or several datasets
of one export) show is one file, and two exports of one build name their frames alike. The lmms-eval harness reads
embedded frames from the build itself, so that export's store has no folder and only resolves files.
"""

import hashlib
import io
from pathlib import Path

from builders.errors import InputError
from builders.hub import resolve_frames
from builders.outputs import write_atomic


IMAGE_EXTENSIONS = {"JPEG": ".jpg", "PNG": ".png", "WEBP": ".webp"}  # formats the harnesses and trainers all read


def image_extension(data: bytes, where: str) -> str:
    """The file extension of an embedded frame's format; a frame that is no image, or one in another format, is an
    error naming the row."""
    from PIL import Image

    try:
        kind = Image.open(io.BytesIO(data)).format
    except (OSError, ValueError) as err:  # PIL's UnidentifiedImageError is an OSError
        raise InputError(f"{where}: a frame is not a readable image ({err})") from None
    if kind not in IMAGE_EXTENSIONS:
        raise InputError(
            f"{where}: frame format {kind} is not one the exported tools read ({', '.join(IMAGE_EXTENSIONS)})"
        )
    return IMAGE_EXTENSIONS[kind]


def undecoded(dataset):
    """``dataset`` (a loaded split) with its frames as stored: images left undecoded (``{"bytes", "path"}``), so they
    are written byte for byte, never re-encoded; paths as they are."""
    from datasets import Image, List

    if isinstance(getattr(dataset.features.get("frames"), "feature", None), Image):
        return dataset.cast_column("frames", List(Image(decode=False)))
    return dataset


class FrameStore:
    """One export's frames as files. ``media_root``: where the build's relative frame paths resolve
    (:func:`builders.hub.media_root`; ``None`` for a build that embeds its frames); ``folder``: where embedded frames
    are written (``None``: the export writes none). ``written``: the written frames' paths by content hash."""

    def __init__(self, media_root: Path | None, folder: Path | None = None):
        self.media_root = media_root
        self.folder = folder
        self.written: dict[str, str] = {}

    def paths(self, frames: list, where: str) -> list[str]:
        """The absolute paths of one row's frames, in order, whatever the build stores (relative paths, resolved
        ones, or images undecoded as ``{"bytes", "path"}``); ``where`` names the row in errors."""
        try:
            frames = resolve_frames({"frames": list(frames)}, self.media_root)["frames"]
        except InputError as err:
            raise InputError(f"{where}: {err}") from None
        paths = []
        for position, frame in enumerate(frames):
            if isinstance(frame, str):
                paths.append(frame)
            elif isinstance(frame, dict) and frame.get("bytes"):
                paths.append(self.write(frame["bytes"], where))
            elif isinstance(frame, dict) and frame.get("path"):
                paths.append(str(Path(frame["path"]).resolve()))
            else:
                raise InputError(
                    f"{where}: frame {position} is neither a path nor image bytes ({type(frame).__name__})"
                )
        return paths

    def write(self, data: bytes, where: str) -> str:
        """The path of an embedded frame under the folder, written the first time it is seen (an existing file of
        the same content, from an earlier export to the same place, is kept)."""
        if self.folder is None:
            raise InputError(f"{where}: the frames are embedded in the build, and this export writes no frame files")
        digest = hashlib.sha256(data).hexdigest()
        if digest not in self.written:
            path = self.folder / digest[:2] / f"{digest}{image_extension(data, where)}"
            if not path.is_file():
                path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(path, data)
            self.written[digest] = str(path)
        return self.written[digest]
