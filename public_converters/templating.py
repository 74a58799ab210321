"""The templating engine for both branches (the Sureon paper's C.2 and C.3): items -> QA pairs in two versions.

Wording lives in ``templates/image.yaml`` and ``templates/clip.yaml``; this module holds one *filler* per template
id, which reads an item's normalised annotations and returns the cases and slot values to render (zero, one or
several QAs per item). Every random choice (which question wording, which negative label, which tool) is seeded by
the source, item and template. Each QA is emitted twice: the direct template output (``version="template"``) and an
instruction-style rephrasing (``version="instruction"``); the LLM paraphrase is the third version
(``paraphrase.py``). Grounded answers are JSON built here and parsed back by ``grounded.parse_answer`` before they
are kept: a template bug cannot put an unparseable answer in the corpus.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from builders.errors import InputError
from builders.options import stable_seed
from public_converters.clips import Clip, LabelTimeline
from public_converters.grounded import dump, parse_answer
from public_converters.schema import CVS_CRITERIA, Frame, Instance, Relation, Segment, Video


TEMPLATE_DIR = Path(__file__).parent / "templates"
REGIONS = (
    ("upper left", "upper middle", "upper right"),
    ("middle left", "centre", "middle right"),
    ("lower left", "lower middle", "lower right"),
)
# grounded template id -> (answer shape, vocabulary kind enumerated in the question, JSON key for label answers)
GROUNDED = {
    "grounded_tool_localisation": ("boxes", "tool", None),
    "grounded_anatomy_localisation": ("boxes", "anatomy", None),
    "grounded_tool_presence": ("presence", "tool", None),
    "grounded_anatomy_presence": ("presence", "anatomy", None),
    "grounded_tool_count": ("count", "tool", None),
    "grounded_phase": ("label", "phase", "phase"),
    "grounded_step": ("label", "step", "step"),
    "grounded_triplets": ("triplets", "tool", None),
    "grounded_tool_action": ("tool_actions", "tool", None),
    "grounded_clip_phase": ("label", "phase", "phase"),
    "grounded_clip_step": ("label", "step", "step"),
    "grounded_clip_action": ("label", "action", "action"),
}


@dataclass(frozen=True)
class Template:
    id: str
    branch: str
    qa_type: str
    question_type: str
    grounded: bool
    requires: tuple[str, ...]
    questions: tuple[str, ...]
    instructions: tuple[str, ...]
    answers: dict = field(default_factory=dict)
    overlay: bool = False
    sampling: str | None = None


@cache
def load_templates(branch: str) -> dict[str, Template]:
    """The branch's templates, checked against the fillers: every template has one, and each grounded one a shape."""
    raw = yaml.safe_load((TEMPLATE_DIR / f"{branch}.yaml").read_text())
    fillers = IMAGE_FILLERS if branch == "image" else CLIP_FILLERS
    templates = {}
    for template_id, entry in raw.items():
        template = Template(
            id=template_id,
            branch=branch,
            qa_type=entry["qa_type"],
            question_type=entry["question_type"],
            grounded=bool(entry["grounded"]),
            requires=tuple(entry.get("requires") or ()),
            questions=tuple(entry["questions"]),
            instructions=tuple(entry["instructions"]),
            answers=dict(entry.get("answers") or {}),
            overlay=bool(entry.get("overlay", False)),
            sampling=entry.get("sampling"),
        )
        if template_id not in fillers:
            raise InputError(f"templates/{branch}.yaml: {template_id} has no filler in templating.py")
        if template.grounded != (template_id in GROUNDED) or (not template.grounded and not template.answers):
            raise InputError(
                f"templates/{branch}.yaml: {template_id}: grounded templates take JSON answers, others answers:"
            )
        templates[template_id] = template
    missing = set(fillers) - set(templates)
    if missing:
        raise InputError(f"templates/{branch}.yaml lacks templates for fillers {sorted(missing)}")
    return templates


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


@dataclass
class Fill:
    case: str  # the answers key, or "json" for grounded templates
    slots: dict
    answer: str | None = None  # the JSON answer of a grounded template
    overlay: Instance | None = None  # the instance whose contour the image shows (mask classification)


@dataclass
class QA:
    item_id: str
    template: Template
    index: int  # position among the template's fills for this item
    question: str
    instruction: str
    answer: str
    overlay: Instance | None = None


def with_article(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def join(words: list[str]) -> str:
    words = list(words)
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def gerund(verb: str) -> str:
    """English -ing form of the action verbs of the sources (grasp -> grasping, clip -> clipping)."""
    head, _, tail = verb.partition(" ")
    if head.endswith("e") and not head.endswith("ee"):
        head = head[:-1] + "ing"
    elif (
        len(head) <= 4
        and len(head) >= 3
        and head[-1] not in "aeiouwxy"
        and head[-2] in "aeiou"
        and head[-3] not in "aeiou"
    ):
        head = head + head[-1] + "ing"
    else:
        head = head + "ing"
    return f"{head} {tail}".strip()


def region(box: list[float]) -> str:
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return REGIONS[min(int(y / 1000 * 3), 2)][min(int(x / 1000 * 3), 2)]


def by_position(instances: list[Instance]) -> list[Instance]:
    """Top-to-bottom then left-to-right by box centre, the order the localisation answers list boxes in."""
    return sorted(instances, key=lambda i: ((i.box[1] + i.box[3]) / 2, (i.box[0] + i.box[2]) / 2, i.label))


def _binary(present: list[str], vocabulary: list[str], rng: random.Random, slot: str) -> list[Fill]:
    fills = [Fill("yes", {slot: rng.choice(present)})] if present else []
    absent = [label for label in vocabulary if label not in present]
    if absent:
        fills.append(Fill("no", {slot: rng.choice(absent)}))
    return fills


# ---- image fillers ------------------------------------------------------------------------------------------------


def _boxed(item: ImageItem, kind: str, ctx: Context) -> list[Instance] | None:
    """The frame's boxed instances of ``kind`` when they are exhaustive (every present boxable class has a box)."""
    boxed = [i for i in item.instances if i.kind == kind and i.box is not None]
    present = item.frame.tools if kind == "tool" else item.frame.anatomy
    if present is None:
        return boxed or None
    needed = set(present) & ctx.boxable.get(kind, set())
    return boxed if needed <= {i.label for i in boxed} else None


def _presence(frame: Frame, kind: str) -> list[str] | None:
    return frame.tools if kind == "tool" else frame.anatomy


def _listing(labels: list[str], slot: str) -> Fill:
    case = "none" if not labels else "one" if len(labels) == 1 else "some"
    return Fill(case, {slot: join(labels)} if labels else {})


def fill_tool_presence(item, ctx, rng):
    tools = _presence(item.frame, "tool")
    return [] if tools is None else [_listing(tools, "tools")]


def fill_tool_presence_binary(item, ctx, rng):
    tools = _presence(item.frame, "tool")
    return [] if tools is None else _binary(tools, ctx.vocabulary.get("tool", []), rng, "tool")


def fill_anatomy_presence(item, ctx, rng):
    structures = _presence(item.frame, "anatomy")
    return [] if structures is None else [_listing(structures, "structures")]


def fill_anatomy_presence_binary(item, ctx, rng):
    structures = _presence(item.frame, "anatomy")
    return [] if structures is None else _binary(structures, ctx.vocabulary.get("anatomy", []), rng, "structure")


def fill_tool_count(item, ctx, rng):
    boxed = _boxed(item, "tool", ctx)
    if boxed is None:
        return []
    count = len(boxed)
    things = "surgical instrument is" if count == 1 else "surgical instruments are"
    return [Fill("some", {"count": count, "things": things}) if count else Fill("none", {})]


def _region_fill(item, ctx, rng, kind: str, slot: str):
    boxed = [i for i in item.instances if i.kind == kind and i.box is not None]
    labels = sorted({i.label for i in boxed})
    unique = [label for label in labels if sum(i.label == label for i in boxed) == 1]  # unambiguous referents only
    if not unique:
        return []
    label = rng.choice(unique)
    box = next(i.box for i in boxed if i.label == label)
    return [Fill("one", {slot: label, "region": region(box)})]


def fill_view_region(item, ctx, rng):
    return _region_fill(item, ctx, rng, "tool", "tool")


def fill_anatomy_region(item, ctx, rng):
    return _region_fill(item, ctx, rng, "anatomy", "structure")


def fill_action_presence(item, ctx, rng):
    actions = item.frame.actions
    return [] if actions is None else [_listing(actions, "actions")]


def _real_relations(item: ImageItem) -> list[Relation]:
    return [r for r in item.relations if not r.verb.startswith("null") and not r.target.startswith("null")]


def fill_triplet_open(item, ctx, rng):
    relations = _real_relations(item)
    by_tool: dict[str, list[Relation]] = {}
    for relation in relations:
        by_tool.setdefault(relation.instrument, []).append(relation)
    single = sorted(tool for tool, found in by_tool.items() if len(found) == 1)
    if not single:
        return []
    relation = by_tool[rng.choice(single)][0]
    return [Fill("one", {"tool": relation.instrument, "verb": gerund(relation.verb), "target": relation.target})]


def fill_phase_open(item, ctx, rng):
    return [Fill("one", {"phase": item.frame.phase})] if item.frame.phase else []


def fill_phase_binary(item, ctx, rng):
    if not item.frame.phase:
        return []
    return _binary([item.frame.phase], ctx.vocabulary.get("phase", []), rng, "phase")


def fill_step_open(item, ctx, rng):
    return [Fill("one", {"step": item.frame.step})] if item.frame.step else []


def fill_cvs_criterion(item, ctx, rng):
    if item.frame.cvs is None:
        return []
    index = rng.randrange(len(CVS_CRITERIA))
    return [Fill("yes" if item.frame.cvs[index] >= 0.5 else "no", {"criterion": CVS_CRITERIA[index]})]


def fill_mask_classification(item, ctx, rng):
    masked = [i for i in item.instances if i.mask is not None]
    if not masked:
        return []
    chosen = rng.choice(masked)
    return [Fill("one", {"answer": chosen.label}, overlay=chosen)]


def fill_procedure_type(item, ctx, rng):
    return [Fill("one", {})]


def _grounded(value) -> list[Fill]:
    return [Fill("json", {}, answer=dump(value))]


def fill_grounded_localisation(kind):
    def fill(item, ctx, rng):
        boxed = _boxed(item, kind, ctx)
        if boxed is None:
            return []
        return _grounded(
            [{"index": n, "label": i.label, "box": i.box} for n, i in enumerate(by_position(boxed), start=1)]
        )

    return fill


def fill_grounded_presence(kind):
    def fill(item, ctx, rng):
        present = _presence(item.frame, kind)
        if present is None:
            return []
        return _grounded({label: label in present for label in ctx.vocabulary.get(kind, [])})

    return fill


def fill_grounded_tool_count(item, ctx, rng):
    boxed = _boxed(item, "tool", ctx)
    return [] if boxed is None else _grounded({"count": len(boxed)})


def fill_grounded_label(key):
    def fill(item, ctx, rng):
        value = getattr(item.frame, key)
        return _grounded({key: value}) if value else []

    return fill


def fill_grounded_triplets(item, ctx, rng):
    if item.frame.tools is None and not item.relations:
        return []
    return _grounded([{"instrument": r.instrument, "verb": r.verb, "target": r.target} for r in _real_relations(item)])


def fill_grounded_tool_action(item, ctx, rng):
    acting = [i for i in item.instances if i.kind == "tool" and i.box is not None and i.actions]
    pairs = [{"tool": i.label, "action": action} for i in by_position(acting) for action in i.actions]
    return _grounded(pairs) if pairs else []


IMAGE_FILLERS = {
    "tool_presence": fill_tool_presence,
    "tool_presence_binary": fill_tool_presence_binary,
    "anatomy_presence": fill_anatomy_presence,
    "anatomy_presence_binary": fill_anatomy_presence_binary,
    "tool_count": fill_tool_count,
    "view_region": fill_view_region,
    "anatomy_region": fill_anatomy_region,
    "action_presence": fill_action_presence,
    "triplet_open": fill_triplet_open,
    "phase_open": fill_phase_open,
    "phase_binary": fill_phase_binary,
    "step_open": fill_step_open,
    "cvs_criterion": fill_cvs_criterion,
    "mask_classification": fill_mask_classification,
    "procedure_type": fill_procedure_type,
    "grounded_tool_localisation": fill_grounded_localisation("tool"),
    "grounded_anatomy_localisation": fill_grounded_localisation("anatomy"),
    "grounded_tool_presence": fill_grounded_presence("tool"),
    "grounded_anatomy_presence": fill_grounded_presence("anatomy"),
    "grounded_tool_count": fill_grounded_tool_count,
    "grounded_phase": fill_grounded_label("phase"),
    "grounded_step": fill_grounded_label("step"),
    "grounded_triplets": fill_grounded_triplets,
    "grounded_tool_action": fill_grounded_tool_action,
}


# ---- clip fillers -------------------------------------------------------------------------------------------------


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
    return _binary(sorted(set(phases)), ctx.vocabulary.get("phase", []), rng, "phase") if phases else []


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
    return _binary(tools, ctx.vocabulary.get("tool", []), rng, "tool")


def fill_grounded_clip_label(kind):
    def fill(item, ctx, rng):
        timeline = LabelTimeline([s for s in item.segments if s.kind == kind])
        label = timeline.constant_label(item.clip.start_frame, item.clip.end_frame)
        return _grounded({kind: label}) if label else []

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


# ---- rendering ----------------------------------------------------------------------------------------------------


def applicable(template: Template, capabilities: set[str], item) -> bool:
    if not set(template.requires) <= capabilities:
        return False
    return template.sampling is None or not isinstance(item, ClipItem) or template.sampling == item.clip.sampling


def render(item, templates: dict[str, Template], ctx: Context, capabilities: set[str]) -> list[QA]:
    """Every QA of one item: each applicable template's fills, rendered and (grounded ones) parsed back."""
    fillers = IMAGE_FILLERS if isinstance(item, ImageItem) else CLIP_FILLERS
    vocab_sets = {kind: set(labels) for kind, labels in ctx.vocabulary.items()}
    found = []
    for template in templates.values():
        if not applicable(template, capabilities, item):
            continue
        rng = random.Random(stable_seed("template", ctx.source, item.item_id, template.id))
        for index, fill in enumerate(fillers[template.id](item, ctx, rng)):
            slots = {"procedure": ctx.procedure, **fill.slots}
            if "tool" in slots:
                slots["a_tool"] = with_article(slots["tool"])
            if template.grounded:
                shape, kind, key = GROUNDED[template.id]
                slots["classes"] = ", ".join(ctx.vocabulary.get(kind, []))
                parse_answer(shape, fill.answer, vocab_sets, key or kind)
                answer = fill.answer
            else:
                answer = template.answers[fill.case].format(**slots)
            question = rng.choice(template.questions).format(**slots)
            instruction = rng.choice(template.instructions).format(**slots)
            found.append(QA(item.item_id, template, index, question, instruction, answer, fill.overlay))
    return found
