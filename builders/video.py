"""Opening local video files, shared by every builder that reads frames (Sureon clips, the public corpus)."""

from pathlib import Path


VIDEO_EXTENSIONS = (".mp4", ".mkv", ".webm", ".mov", ".avi", ".m4v")


def open_decoder(path: Path, device: str = "cpu", num_threads: int = 1, size: tuple[int, int] | None = None):
    """A torchcodec decoder with exact seeking (frame-accurate timestamps, what every sampler here relies on).

    ``num_threads`` is FFmpeg's decoding threads (0: one per core); threads never change the decoded pixels.
    ``device="cuda"`` decodes with NVDEC (torchcodec's CUDA device; frames come back on the GPU). ``size``
    ``(height, width)`` has FFmpeg scale each frame while converting it to RGB (bilinear, antialiased), far cheaper
    than converting at full size and resizing afterwards."""
    from torchcodec.decoders import VideoDecoder  # heavy import, and FFmpeg libraries are needed only here

    transforms = None
    if size is not None:
        from torchcodec.transforms import Resize

        transforms = [Resize(size)]
    return VideoDecoder(
        str(path), seek_mode="exact", device=device, num_ffmpeg_threads=num_threads, transforms=transforms
    )


def probe_header(path: Path):
    """The video stream's metadata from the file's header alone (torchcodec's approximate mode: no scan of the
    file, milliseconds even for an hour of video)."""
    from torchcodec.decoders import VideoDecoder

    return VideoDecoder(str(path), seek_mode="approximate").metadata


def probe_size(path: Path) -> tuple[int, int]:
    """``(width, height)`` from the file's header, without the exact-mode scan."""
    metadata = probe_header(path)
    return metadata.width, metadata.height


def header_end_seconds(metadata) -> float | None:
    """Where the video stream ends, in seconds, by its header (``None`` when the header does not say)."""
    for value in (getattr(metadata, "end_stream_seconds", None), getattr(metadata, "duration_seconds", None)):
        if value is not None and value > 0:
            return float(value)
    return None
