"""The image branch's fillers (the Sureon paper's C.2, wording in ``templates/image.yaml``): what one annotated frame
says about tools, anatomy, actions, triplets, phase, step, the critical view of safety and masks.
"""

from __future__ import annotations

from public_converters.fillers.fill import Fill, fill_procedure_type, join, json_answer, yes_no_pair
from public_converters.items import Context, ImageItem
from public_converters.schema import CVS_CRITERIA, Frame, Instance, Relation


REGIONS = (
    ("upper left", "upper middle", "upper right"),
    ("middle left", "centre", "middle right"),
    ("lower left", "lower middle", "lower right"),
)


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
    return [] if tools is None else yes_no_pair(tools, ctx.vocabulary.get("tool", []), rng, "tool")


def fill_anatomy_presence(item, ctx, rng):
    structures = _presence(item.frame, "anatomy")
    return [] if structures is None else [_listing(structures, "structures")]


def fill_anatomy_presence_binary(item, ctx, rng):
    structures = _presence(item.frame, "anatomy")
    return [] if structures is None else yes_no_pair(structures, ctx.vocabulary.get("anatomy", []), rng, "structure")


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
    return yes_no_pair([item.frame.phase], ctx.vocabulary.get("phase", []), rng, "phase")


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


def fill_grounded_localisation(kind):
    def fill(item, ctx, rng):
        boxed = _boxed(item, kind, ctx)
        if boxed is None:
            return []
        return json_answer(
            [{"index": n, "label": i.label, "box": i.box} for n, i in enumerate(by_position(boxed), start=1)]
        )

    return fill


def fill_grounded_presence(kind):
    def fill(item, ctx, rng):
        present = _presence(item.frame, kind)
        if present is None:
            return []
        return json_answer({label: label in present for label in ctx.vocabulary.get(kind, [])})

    return fill


def fill_grounded_tool_count(item, ctx, rng):
    boxed = _boxed(item, "tool", ctx)
    return [] if boxed is None else json_answer({"count": len(boxed)})


def fill_grounded_label(key):
    def fill(item, ctx, rng):
        value = getattr(item.frame, key)
        return json_answer({key: value}) if value else []

    return fill


def fill_grounded_triplets(item, ctx, rng):
    if item.frame.tools is None and not item.relations:
        return []
    return json_answer(
        [{"instrument": r.instrument, "verb": r.verb, "target": r.target} for r in _real_relations(item)]
    )


def fill_grounded_tool_action(item, ctx, rng):
    acting = [i for i in item.instances if i.kind == "tool" and i.box is not None and i.actions]
    pairs = [{"tool": i.label, "action": action} for i in by_position(acting) for action in i.actions]
    return json_answer(pairs) if pairs else []


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
