"""The items the public corpus templates, made from a normalised source: an annotated frame (image branch), a clip
sampled from a video (clip branch), and the source's :class:`Context` a filler may use besides the item.

Every annotated frame is an item or is counted by why it is not (no image, no annotation, a video outside the split
variant), and every grounded window sampled is an item or counted as thinned: the counts the build's manifest
reconciles. Apart from the build because the templating engine, the fillers and the build all speak these types.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections import Counter, defaultdict
from dataclasses import dataclass, field

from public_converters.clips import Clip, SamplingConfig, grounded_clips, spread, strategic_clips
from public_converters.normalise import Normalised
from public_converters.schema import Frame, Instance, Relation, Segment, Video


CLIP_FRAMES = 8
SPLITS = ("train", "validation", "test")


@dataclass
class Context:
    """What a filler may use besides the item: the source's vocabulary per kind, procedure and boxable classes."""

    source: str
    procedure: str
    vocabulary: dict[str, list[str]]
    boxable: dict[str, set[str]] = field(default_factory=dict)


@dataclass
class ImageItem:
    source: str
    video: Video
    frame: Frame
    instances: list[Instance]
    relations: list[Relation]

    @property
    def item_id(self) -> str:
        return f"{self.source}/{self.video.video_id}/{self.frame.frame_index}"


@dataclass
class ClipItem:
    source: str
    video: Video
    clip: Clip
    segments: list[Segment]  # the video's segments overlapping the clip
    kinds: frozenset[str] = frozenset()  # the kinds the video is annotated with (a kind absent here is unknown)

    @property
    def item_id(self) -> str:
        return f"{self.source}/{self.video.video_id}/{self.clip.start_frame}-{self.clip.end_frame}"


def image_items(normalised: Normalised) -> tuple[list[ImageItem], Counter]:
    """Annotated frames that have an image (a file, or a frame of the video to decode); every other frame is counted
    by why it is not an item."""
    tables, source = normalised.tables, normalised.spec.name
    videos = {v.video_id: v for v in tables.videos}
    instances, relations = defaultdict(list), defaultdict(list)
    for instance in tables.instances:
        instances[(instance.video_id, instance.frame_index)].append(instance)
    for relation in tables.relations:
        relations[(relation.video_id, relation.frame_index)].append(relation)
    items, skipped = [], Counter()
    for frame in tables.frames:
        key = (frame.video_id, frame.frame_index)
        annotated = any(
            value is not None
            for value in (frame.phase, frame.step, frame.actions, frame.tools, frame.anatomy, frame.cvs)
        )
        from_video = normalised.spec.video_frames_as_images and videos[frame.video_id].video_path
        if not frame.image_path and not from_video:
            skipped["frame without an image"] += 1
        elif not (annotated or instances[key] or relations[key]):
            skipped["frame without annotations"] += 1
        elif videos[frame.video_id].split not in SPLITS:
            skipped["video outside the split variant"] += 1
        else:
            items.append(ImageItem(source, videos[frame.video_id], frame, instances[key], relations[key]))
    return items, skipped


def frames_by_video(normalised: Normalised) -> dict[str, list[int]]:
    """The sorted frames with an image file, per video (what a clip of a frame-folder source can show)."""
    found = defaultdict(list)
    for frame in normalised.tables.frames:
        if frame.image_path:
            found[frame.video_id].append(frame.frame_index)
    return {video: sorted(frames) for video, frames in found.items()}


def clip_items(normalised: Normalised, config: SamplingConfig) -> tuple[list[ClipItem], Counter]:
    tables, source = normalised.tables, normalised.spec.name
    segments = defaultdict(list)
    for segment in tables.segments:
        segments[segment.video_id].append(segment)
    available = frames_by_video(normalised)
    items, counts = [], Counter()
    for video in tables.videos:
        if video.split not in SPLITS:
            counts["videos outside the split variant"] += 1
            continue
        own = segments[video.video_id]
        kinds = frozenset(s.kind for s in own)
        shipped = None if video.video_path else available.get(video.video_id, [])
        grounded, qualified = grounded_clips(video, own, config, source, shipped)
        counts["grounded windows qualified"] += qualified
        counts["grounded windows thinned"] += qualified - len(grounded)
        for clip in [*strategic_clips(video, own, config, source), *grounded]:
            overlapping = [s for s in own if s.end_frame >= clip.start_frame and s.start_frame <= clip.end_frame]
            items.append(ClipItem(source, video, clip, overlapping, kinds))
    return items, counts


def clip_frames(item: ClipItem, available: dict[str, list[int]]) -> list[int]:
    """The frames a clip shows: the grounded window's own, else 8 spread over the clip (over its image frames when
    the source ships frames instead of a video; none if the clip falls between them)."""
    if item.clip.frames:
        return list(item.clip.frames)
    if item.video.video_path:
        span = list(range(item.clip.start_frame, item.clip.end_frame + 1))
    else:
        frames = available.get(item.video.video_id, [])
        span = frames[bisect_left(frames, item.clip.start_frame) : bisect_right(frames, item.clip.end_frame)]
    return spread(span, CLIP_FRAMES)


def context_for(normalised: Normalised) -> Context:
    spec, tables = normalised.spec, normalised.tables
    vocabulary = {kind: sorted(set(table.values())) for kind, table in spec.labels.items()}
    boxable = defaultdict(set)
    for instance in tables.instances:
        if instance.box is not None:
            boxable[instance.kind].add(instance.label)
    return Context(spec.name, spec.procedure, vocabulary, dict(boxable))
