"""Opening local video files, shared by every builder that reads frames (Sureon clips, the public corpus)."""

from pathlib import Path


VIDEO_EXTENSIONS = (".mp4", ".mkv", ".webm", ".mov", ".avi", ".m4v")


def open_decoder(path: Path):
    """A torchcodec decoder with exact seeking (frame-accurate timestamps, what every sampler here relies on)."""
    from torchcodec.decoders import VideoDecoder  # heavy import, and FFmpeg libraries are needed only here

    return VideoDecoder(str(path), seek_mode="exact")
