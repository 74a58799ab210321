"""Whether a fetched file can serve the clips the release asks of it.

Each file is opened with torchcodec and must cover every clip window of its source (``VIDEO_END_TOLERANCE`` past the
end is accepted, as the frame sampler clamps there), and the last frame needed must decode. A section
(``--sections``) is measured from its packets alone: where its first frame sits on the source's frame grid, which
:mod:`builders.sureon.sections` records for the frame sampler. A file that fails is set aside as
``<name>.rejected``, never read by the build.

Apart from the fetcher because it judges files, whoever put them there: a file supplied by hand goes through the same
checks as a downloaded one.
"""

import itertools
from pathlib import Path

from builders.sureon.sections import Section, sidecar_path
from builders.video import open_decoder


VIDEO_END_TOLERANCE = 1.0  # seconds a clip window may run past the end of its video


class IntegrityError(RuntimeError):
    """A file that cannot serve the clips the release asks of it."""


def _frame_times(video: Path) -> list[float]:
    """Presentation times of every video frame, from the packets alone (no decoding)."""
    import av

    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        times = [float(p.pts * p.time_base) for p in container.demux(stream) if p.pts is not None and p.size]
    return sorted(times)


def measure_section(video: Path, source_id: str, requested: tuple[float, float], windows) -> Section:
    """Where a section downloaded with ``-copyts`` sits in its source; raise :class:`IntegrityError` if unusable."""
    times = _frame_times(video)
    if len(times) < 2:
        raise IntegrityError(f"{video.name}: the section holds {len(times)} frame(s)")
    steps = sorted(b - a for a, b in itertools.pairwise(times))
    fps = 1.0 / steps[len(steps) // 2]
    first_index = round(times[0] * fps)
    if abs(times[0] * fps - first_index) > 0.01:
        raise IntegrityError(
            f"{video.name}: the section's first frame ({times[0]:.4f}s) is off the {fps:.3f} fps grid (a source "
            "with a variable rate or a non-zero start): fetch it without --sections"
        )
    last_needed = max(e for _, e in windows)
    for k, t in enumerate(times):  # every frame up to the last window is present, so file index = source index
        if t > last_needed + 1.0 / fps:
            break
        if abs(t - (first_index + k) / fps) > 0.5 / fps:
            raise IntegrityError(f"{video.name}: frames missing or out of order near {t:.2f}s of the source")
    return Section(source_id, first_index, round(fps, 9), times[0], times[-1], requested)


def verify_video(video: Path, windows, section: Section | None = None) -> dict:
    """Open ``video`` with torchcodec and check it covers every window; return its duration and resolution."""
    try:
        decoder = open_decoder(video)
        metadata = decoder.metadata
        begin, end = metadata.begin_stream_seconds or 0.0, metadata.end_stream_seconds
        if not metadata.num_frames or end is None:
            raise IntegrityError(f"{video.name}: no video frames")
        first_needed = min(s for s, _ in windows)
        last_needed = max(e for _, e in windows)
        if section is not None and first_needed < section.start - 1e-6:
            raise IntegrityError(
                f"{video.name}: the section starts at {section.start:.2f}s, after the first clip ({first_needed:.2f}s)"
            )
        covered_until = end if section is not None else end - begin
        if last_needed > covered_until + (0.0 if section is not None else VIDEO_END_TOLERANCE):
            raise IntegrityError(
                f"{video.name}: {'section ends' if section else 'duration is'} {covered_until:.2f}s but a clip "
                f"ends at {last_needed:.2f}s (truncated, or not the video the release used)"
            )
        decoder.get_frame_played_at(min(last_needed, end - 1e-3))  # the last frame needed decodes
    except IntegrityError:
        raise
    except (RuntimeError, ValueError, IndexError, OSError) as err:
        raise IntegrityError(f"{video.name}: unreadable ({str(err).splitlines()[0] if str(err) else err!r})") from err
    return {
        "duration": round(end - begin, 3),
        "width": metadata.width,
        "height": metadata.height,
        "fps": round(metadata.average_fps, 6),
    }


def covers(entry: dict, windows) -> bool:
    """Whether a verified file's span (section, or duration) holds every window."""
    start, end = entry["section"] if "section" in entry else (0.0, entry["duration"] + VIDEO_END_TOLERANCE)
    return start - 1e-6 <= min(s for s, _ in windows) and max(e for _, e in windows) <= end


def reject(video: Path) -> None:
    """Set a failed file aside as ``<name>.rejected`` (the build never reads it; the user may inspect it)."""
    video.replace(video.with_name(video.name + ".rejected"))
    sidecar_path(video).unlink(missing_ok=True)
