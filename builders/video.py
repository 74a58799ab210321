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


def probe_size(path: Path) -> tuple[int, int]:
    """``(width, height)`` from the file's header, without the exact-mode scan."""
    from torchcodec.decoders import VideoDecoder

    metadata = VideoDecoder(str(path), seek_mode="approximate").metadata
    return metadata.width, metadata.height
