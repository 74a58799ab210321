"""The templating engine for both branches (the Sureon paper's C.2 and C.3): items -> QA pairs in two versions.

Wording lives in ``templates/image.yaml`` and ``templates/clip.yaml``; the package ``fillers`` holds one *filler* per
template id, which reads an item's normalised annotations and returns the cases and slot values to render (zero, one
or several QAs per item). This module loads the templates (each checked against its filler), and renders each fill
into a question, an instruction and an answer. Every random choice (which question wording, which negative label,
which tool) is seeded by the source, item and template. Each QA is emitted twice: the direct template output
(``version="template"``) and an instruction-style rephrasing (``version="instruction"``); the LLM paraphrase is the
third version (``paraphrase.py``). Grounded answers are JSON built by the fillers and parsed back here by
``grounded.parse_answer`` before they are kept: a template bug cannot put an unparseable answer in the corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import yaml

from builders.errors import InputError
from builders.options import stable_seed
from public_converters.fillers.clip import CLIP_FILLERS
from public_converters.fillers.image import IMAGE_FILLERS
from public_converters.grounded import parse_answer
from public_converters.items import ClipItem, Context, ImageItem
from public_converters.schema import Instance


TEMPLATE_DIR = Path(__file__).parent / "templates"
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
            raise InputError(f"templates/{branch}.yaml: {template_id} has no filler in fillers/{branch}.py")
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
