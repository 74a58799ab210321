"""The clip branch's fillers (the Sureon paper's C.3, wording in ``templates/clip.yaml``): what a clip's segments say
about its phases and their transitions, steps, actions and tool use, with times in seconds from the clip's start.
"""

from __future__ import annotations

import itertools

from public_converters.clips import LabelTimeline
from public_converters.fillers.fill import Fill, fill_procedure_type, join, json_answer, yes_no_pair
from public_converters.items import ClipItem
from public_converters.schema import Segment


def seconds(frames: int, fps: float) -> str:
    value = frames / fps
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}".rstrip("0").rstrip(".")


def clip_sequence(item: ClipItem, kind: str) -> list[Segment]:
    """The clip's segments of ``kind`` in time order, each clipped to the clip window."""
    clip = item.clip
    found = sorted((s for s in item.segments if s.kind == kind), key=lambda s: (s.start_frame, s.label))
    return [
        Segment(s.video_id, kind, s.label, max(s.start_frame, clip.start_frame), min(s.end_frame, clip.end_frame))
        for s in found
    ]


def _labels_in_order(sequence: list[Segment]) -> list[str]:
    labels: list[str] = []
    for segment in sequence:
        if not labels or labels[-1] != segment.label:
            labels.append(segment.label)
    return labels


def _transition(item: ClipItem) -> dict | None:
    phases = clip_sequence(item, "phase")
    for before, after in itertools.pairwise(phases):
        if before.label != after.label:
            offset = seconds(after.start_frame - item.clip.start_frame, item.video.fps)
            return {"phase1": before.label, "phase2": after.label, "time": offset}
    return None


def _position(item: ClipItem, segment: Segment) -> str:
    if item.clip.anchor in ("beginning", "middle", "end"):
        return item.clip.anchor
    full = next(s for s in item.segments if s.kind == "phase" and s.label == segment.label)
    centre = (item.clip.start_frame + item.clip.end_frame) / 2
    fraction = (centre - full.start_frame) / max(1, full.end_frame - full.start_frame)
    return "beginning" if fraction < 1 / 3 else "end" if fraction > 2 / 3 else "middle"


def fill_phase_descriptive(item, ctx, rng):
    phases = _labels_in_order(clip_sequence(item, "phase"))
    if not phases:
        return []
    transition = _transition(item)
    if transition:
        return [Fill("transition", transition)]
    case = rng.choice(("plain", "procedure", "position", "both"))
    segment = clip_sequence(item, "phase")[0]
    return [Fill(case, {"phase": phases[0], "position": _position(item, segment)})]


def fill_phase_transition_temporal(item, ctx, rng):
    transition = _transition(item)
    return [Fill("one", transition)] if transition else []


def fill_clip_phase_binary(item, ctx, rng):
    if "phase" not in item.kinds:
        return []
    phases = _labels_in_order(clip_sequence(item, "phase"))
    return yes_no_pair(sorted(set(phases)), ctx.vocabulary.get("phase", []), rng, "phase") if phases else []


def fill_phase_count(item, ctx, rng):
    phases = list(dict.fromkeys(_labels_in_order(clip_sequence(item, "phase"))))  # distinct, in order of appearance
    if not phases:
        return []
    things = "phase is" if len(phases) == 1 else "distinct phases are"
    return [Fill("some", {"count": len(phases), "things": things, "phases": join(phases)})]


def fill_step_descriptive(item, ctx, rng):
    steps = _labels_in_order(clip_sequence(item, "step"))
    if not steps:
        return []
    if len(steps) == 1:
        return [Fill("single", {"step": steps[0]})]
    if len(steps) == 2:
        return [Fill("two", {"step1": steps[0], "step2": steps[1]})]
    return [Fill("multi", {"steps": ", ".join(steps)})]


def fill_action_descriptive(item, ctx, rng):
    if "action" not in item.kinds:
        return []
    actions = list(dict.fromkeys(_labels_in_order(clip_sequence(item, "action"))))
    return [Fill("some", {"actions": join(actions)}) if actions else Fill("none", {})]


def fill_tool_usage(item, ctx, rng):
    tools = clip_sequence(item, "tool")
    if not tools:
        return []
    tool = rng.choice(sorted({s.label for s in tools}))
    used = [s for s in tools if s.label == tool]
    first, last = min(s.start_frame for s in used), max(s.end_frame for s in used)
    if len(used) > 1:  # used in several intervals: describe the first, which a model can check from its frames
        first, last = used[0].start_frame, used[0].end_frame
    if first == item.clip.start_frame and last == item.clip.end_frame:
        return [Fill("whole", {"tool": tool})]
    fps = item.video.fps
    start = seconds(first - item.clip.start_frame, fps)
    end = seconds(last + 1 - item.clip.start_frame, fps)
    return [Fill("one", {"tool": tool, "start": start, "end": end})]


def fill_tool_binary(item, ctx, rng):
    if "tool" not in item.kinds:  # no tool annotation for this video: absence would be a guess
        return []
    tools = sorted({s.label for s in clip_sequence(item, "tool")})
    return yes_no_pair(tools, ctx.vocabulary.get("tool", []), rng, "tool")


def fill_grounded_clip_label(kind):
    def fill(item, ctx, rng):
        timeline = LabelTimeline([s for s in item.segments if s.kind == kind])
        label = timeline.constant_label(item.clip.start_frame, item.clip.end_frame)
        return json_answer({kind: label}) if label else []

    return fill


CLIP_FILLERS = {
    "phase_descriptive": fill_phase_descriptive,
    "phase_transition_temporal": fill_phase_transition_temporal,
    "phase_binary": fill_clip_phase_binary,
    "phase_count": fill_phase_count,
    "step_descriptive": fill_step_descriptive,
    "action_descriptive": fill_action_descriptive,
    "tool_usage": fill_tool_usage,
    "tool_binary": fill_tool_binary,
    "grounded_clip_phase": fill_grounded_clip_label("phase"),
    "grounded_clip_step": fill_grounded_clip_label("step"),
    "grounded_clip_action": fill_grounded_clip_label("action"),
    "procedure_type_clip": fill_procedure_type,
}
