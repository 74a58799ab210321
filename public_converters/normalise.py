"""Stage 1 for one source: native files -> the common schema with canonical labels, masks turned into instances.

``normalise_source`` runs the source's reader, maps every label (all misses reported at once), converts the semantic
masks with the source's seg-to-box policies (in ``num_proc`` processes), fills per-frame presence from exhaustive
masks, applies an official split variant, and checks the result against the capabilities the source declares.
What a reader warns about the release (its own ``UserWarning`` classes: EndoVis2018's label folder one frame short of
its video, a HeiChole video missing) goes into the source's ``warnings``, which the manifest counts and the command
prints, rather than to the interpreter's stderr alone.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from builders.errors import InputError
from public_converters.schema import (
    CAPABILITIES,
    Frame,
    Instance,
    SemanticMask,
    SourceError,
    SourceTables,
    check_tables,
    sort_tables,
)
from public_converters.seg_to_box import instances_from_mask
from public_converters.spec import SourceSpec


@dataclass
class Normalised:
    spec: SourceSpec
    root: Path
    tables: SourceTables
    split_variant: str | None
    stats: Counter = field(default_factory=Counter)
    # kind -> one case each ({"file": relative to the root or None, "message": ...}): what the build kept but the
    # user must hear about (the media check's SHORT_ANNOTATION); the manifest counts them, the command prints them
    warnings: dict[str, list[dict]] = field(default_factory=dict)

    def info(self) -> dict:
        return {
            "source": self.spec.name,
            "title": self.spec.title,
            "procedure": self.spec.procedure,
            "branches": list(self.spec.branches),
            "capabilities": sorted(observed_capabilities(self.tables)),
            "split_variant": self.split_variant,
            "counts": {
                name: len(getattr(self.tables, name))
                for name in ("videos", "frames", "instances", "segments", "relations")
            },
            "seg_to_box": dict(sorted(self.stats.items())),
            "read_counts": dict(sorted(self.tables.read_counts.items())),
            "warnings": {kind: {"count": len(cases), "cases": cases} for kind, cases in sorted(self.warnings.items())},
        }


def observed_capabilities(tables: SourceTables) -> set[str]:
    frames, instances = tables.frames, tables.instances
    kinds = {segment.kind for segment in tables.segments}
    found = {
        "has_phase": any(f.phase for f in frames) or "phase" in kinds,
        "has_step": any(f.step for f in frames) or "step" in kinds,
        "has_actions": any(f.actions for f in frames) or "action" in kinds or any(i.actions for i in instances),
        "has_tool_presence": any(f.tools is not None for f in frames) or "tool" in kinds,
        "has_anatomy_presence": any(f.anatomy is not None for f in frames),
        "has_tool_bbox": any(i.kind == "tool" and i.box for i in instances),
        "has_anatomy_bbox": any(i.kind == "anatomy" and i.box for i in instances),
        "has_masks": any(i.mask for i in instances),
        "has_triplets": bool(tables.relations),
        "has_cvs": any(f.cvs is not None for f in frames),
    }
    return {name for name in CAPABILITIES if found[name]}


def _mask_labels(spec: SourceSpec, masks: list[SemanticMask], mapper) -> tuple[dict, dict]:
    """Kind and canonical name of every label named by a mask palette; unmapped ones go to the mapper's misses."""
    kinds, canonical = {}, {}
    for ref in masks:
        for label in ref.palette.values():
            if label is None or label in kinds:
                continue
            kind = mapper.kind_of(label) or "anatomy"
            kinds[label] = kind
            canonical[label] = mapper.map(kind, label, ref.path)
    mapper.raise_if_unmapped()  # an unknown class is reported with its file before any policy question
    missing = sorted(label for label in kinds if label not in spec.mask_policies)
    if missing:
        raise InputError(
            f"{spec.name}: mask classes without a seg-to-box policy: {missing}; add them to mask_policies "
            "(single | components | semantic | instances)"
        )
    return kinds, canonical


def _convert_chunk(args) -> tuple[list[Instance], Counter]:
    masks, root, policies, kinds, canonical = args
    instances, stats = [], Counter()
    for ref in masks:
        found, counts = instances_from_mask(ref, root, policies, kinds, canonical)
        instances += found
        stats += counts
        stats["masks"] += 1
    return instances, stats


def convert_masks(
    masks: list[SemanticMask], root: Path, policies: dict, kinds: dict, canonical: dict, num_proc: int = 1
) -> tuple[list[Instance], Counter]:
    """Seg-to-box over every mask, in ``num_proc`` processes; the result does not depend on ``num_proc``."""
    if not masks:
        return [], Counter()
    chunk = max(1, -(-len(masks) // (num_proc * 4)))
    jobs = [(masks[i : i + chunk], root, policies, kinds, canonical) for i in range(0, len(masks), chunk)]
    if num_proc <= 1:
        results = map(_convert_chunk, jobs)
    else:
        with ProcessPoolExecutor(num_proc) as pool:
            results = list(pool.map(_convert_chunk, jobs))
    instances, stats = [], Counter()
    for found, counts in results:
        instances += found
        stats += counts
    return instances, stats


def _fill_presence(
    frames: list[Frame], masks: list[SemanticMask], instances: list[Instance], kinds: dict[str, str]
) -> list[Frame]:
    """A class mask is exhaustive for the kinds its palette names: its frame's tool (or anatomy) presence is what the
    mask shows, maybe nothing. A tools-only mask says nothing about anatomy, which stays as the reader left it."""
    covered: dict[tuple, set[str]] = {}
    for mask in (m for m in masks if m.exhaustive):
        named = {kinds[label] for label in mask.palette.values() if label is not None}
        covered.setdefault((mask.video_id, mask.frame_index), set()).update(named)
    present: dict[tuple, dict[str, set]] = {key: {"tool": set(), "anatomy": set()} for key in covered}
    for instance in instances:
        key = (instance.video_id, instance.frame_index)
        if key in present:
            present[key][instance.kind].add(instance.label)
    known = {(f.video_id, f.frame_index) for f in frames}
    missing = sorted({(m.video_id, m.frame_index) for m in masks} - known)
    if missing:
        raise InputError(f"masks for frames the reader did not list, e.g. {missing[:3]}")
    filled = []
    for frame in frames:
        key = (frame.video_id, frame.frame_index)
        if key in covered:
            changes = {}
            if "tool" in covered[key]:
                changes["tools"] = sorted(set(frame.tools or []) | present[key]["tool"])
            if "anatomy" in covered[key]:
                changes["anatomy"] = sorted(set(frame.anatomy or []) | present[key]["anatomy"])
            frame = dataclasses.replace(frame, **changes)
        filled.append(frame)
    return filled


def renumber(instances: list[Instance]) -> list[Instance]:
    """Instance ids 0..n-1 per (video, frame, kind, label), in conversion order: one mask file per instrument (or
    per structure) would otherwise give every instance id 0."""
    seen: Counter = Counter()
    renumbered = []
    for instance in instances:
        key = (instance.video_id, instance.frame_index, instance.kind, instance.label)
        renumbered.append(dataclasses.replace(instance, instance_id=seen[key]))
        seen[key] += 1
    return renumbered


def apply_split_variant(spec: SourceSpec, tables: SourceTables, variant: str | None) -> SourceTables:
    if variant is None:
        return tables
    if variant not in spec.split_variants:
        raise InputError(f"{spec.name}: unknown split variant {variant!r}; known: {sorted(spec.split_variants)}")
    assignment = spec.split_variants[variant]
    videos = [dataclasses.replace(v, split=assignment.get(v.video_id, "unused")) for v in tables.videos]
    return dataclasses.replace(tables, videos=videos)


def read_with_warnings(spec: SourceSpec, root: Path, mapper) -> tuple[SourceTables, dict[str, list[dict]]]:
    """The reader's tables, and the warnings it gave about the release by kind (the warning's class name): one case
    each, ``{"file": None, "message": ...}`` (the message names the file). Other warnings pass through."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tables = spec.read(root, mapper)
    found: dict[str, list[dict]] = {}
    for item in caught:
        if issubclass(item.category, UserWarning) and item.category.__module__.startswith("public_converters."):
            found.setdefault(item.category.__name__, []).append({"file": None, "message": str(item.message)})
        else:
            warnings.warn_explicit(item.message, item.category, item.filename, item.lineno)
    return tables, found


def normalise_source(
    spec: SourceSpec, root: str | Path, *, split_variant: str | None = None, num_proc: int = 1
) -> Normalised:
    root = Path(root)
    if not root.is_dir():
        raise SourceError(root, "source folder not found", fix=f"pass --source {spec.name}=<folder of the release>")
    mapper = spec.mapper()
    tables, reader_warnings = read_with_warnings(spec, root, mapper)
    kinds, canonical = _mask_labels(spec, tables.masks, mapper)
    mapper.raise_if_unmapped()
    policies = {label: spec.mask_policies[label] for label in kinds}
    mask_instances, stats = convert_masks(tables.masks, root, policies, kinds, canonical, num_proc)
    mask_instances = renumber(mask_instances)
    frames = _fill_presence(tables.frames, tables.masks, mask_instances, kinds)
    tables = dataclasses.replace(tables, frames=frames, instances=tables.instances + mask_instances)
    tables = sort_tables(apply_split_variant(spec, tables, split_variant or spec.default_split_variant))
    check_tables(tables, spec.name)
    undeclared = observed_capabilities(tables) - spec.capabilities
    if undeclared:
        raise InputError(f"{spec.name}: the tables show {sorted(undeclared)} but the source does not declare them")
    return Normalised(spec, root, tables, split_variant or spec.default_split_variant, stats, reader_warnings)
