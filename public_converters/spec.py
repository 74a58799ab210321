"""What a public source declares about itself: the data every shared stage needs, next to its reader.

A source module in ``public_converters/sources/`` defines ``SPEC = SourceSpec(...)`` and its ``read`` function; a
sample module of the same name in ``public_converters/samples/`` writes a tiny copy in the native layout (for the
tests and ``make demo``). Nothing else needs editing to add a source: the registry discovers both.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from builders.errors import InputError
from public_converters.schema import BRANCHES, CAPABILITIES, SEG_POLICIES, SourceTables
from public_converters.vocabulary import LabelMapper, check_label_table


@dataclass(frozen=True)
class SourceSpec:
    name: str  # the registry key and the ``--source NAME=DIR`` name, e.g. "cholec80"
    title: str  # as the Sureon paper's Table 13 writes it
    procedure: str  # canonical procedure type, e.g. "laparoscopic cholecystectomy"
    branches: tuple[str, ...]  # "image", "clip" or both
    capabilities: frozenset[str]
    labels: dict[str, dict[str, str]]  # kind -> native label -> canonical name
    read: Callable[[Path, LabelMapper], SourceTables]
    # native mask label -> seg-to-box policy (single, components, semantic or instances)
    mask_policies: dict[str, str] = field(default_factory=dict)
    split_variants: dict[str, dict[str, str]] = field(default_factory=dict)  # variant -> video_id -> split
    default_split_variant: str | None = None
    # True when the image branch takes its frames from the videos (no frame images ship): frames without an image
    # file are then decoded from ``Video.video_path``; otherwise such frames (labels for the clip branch) are skipped
    video_frames_as_images: bool = False
    homepage: str = ""
    license: str = ""
    unconfirmed: tuple[str, ...] = ()  # facts the reader assumes but could not confirm (README source table)

    def __post_init__(self):
        problems = [f"unknown branch {b!r}" for b in self.branches if b not in BRANCHES]
        problems += [f"unknown capability {c!r}" for c in self.capabilities if c not in CAPABILITIES]
        problems += [f"mask policy {p!r} for {k!r}" for k, p in self.mask_policies.items() if p not in SEG_POLICIES]
        if self.default_split_variant and self.default_split_variant not in self.split_variants:
            problems.append(f"default split variant {self.default_split_variant!r} is not among split_variants")
        if problems:
            raise InputError(f"source {self.name}: " + "; ".join(problems))
        check_label_table(self.name, self.labels)

    def mapper(self) -> LabelMapper:
        return LabelMapper(self.name, self.labels)


def _discover(package: str) -> dict[str, object]:
    module = importlib.import_module(package)
    return {
        info.name: importlib.import_module(f"{package}.{info.name}")
        for info in pkgutil.iter_modules(module.__path__)
        if not info.name.startswith("_")
    }


def registry() -> dict[str, SourceSpec]:
    """Every source, by name, in a stable order."""
    specs = {module.SPEC.name: module.SPEC for module in _discover("public_converters.sources").values()}
    return dict(sorted(specs.items()))


def get_source(name: str) -> SourceSpec:
    sources = registry()
    if name not in sources:
        like = resembling(name)
        hint = f"did you mean {' or '.join(repr(n) for n in like)}? " if like else ""
        raise InputError(f"unknown public source {name!r}; {hint}known: {', '.join(sources)}")
    return sources[name]


# letters a folder name may carry for the digits they look like ("Cholec8O")
_LOOKALIKES = str.maketrans({"o": "0", "i": "1", "l": "1"})


def _squashed(name: str) -> str:
    """A name without case or separators: ``Cholec-80``, ``cholec_80``, ``CHOLEC80`` -> one key."""
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _one_edit_apart(a: str, b: str) -> bool:
    """One letter inserted, dropped, changed or two neighbours swapped, where no digit is involved: a digit names
    another release (``endovis2017`` / ``endovis2018``), a letter is a typo (``endoscape``, ``hemosets``)."""
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    start = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    rest_a, rest_b = a[start:], b[start:]
    if len(a) == len(b):
        if rest_a[1:] == rest_b[1:]:
            changed = rest_a[0] + rest_b[0]
        elif len(rest_a) > 1 and rest_a[:2] == rest_b[1::-1] and rest_a[2:] == rest_b[2:]:
            changed = rest_a[:2]
        else:
            return False
    elif len(a) > len(b):
        changed = rest_a[0] if rest_a[1:] == rest_b else "0"
    else:
        changed = rest_b[0] if rest_b[1:] == rest_a else "0"
    return not any(c.isdigit() for c in changed)


def looks_like(name: str, target: str) -> bool:
    """``name`` is a near miss of ``target`` (and not it): the same but for case, separators or a letter that looks
    like a digit (``Cholec80``, ``cholec_80``, ``Cholec8O`` for ``cholec80``), or one typo away (``endoscape``).
    Names shorter than four letters and digits are never near misses (too many would be)."""
    key, other = _squashed(name), _squashed(target)
    if name == target or len(key) < 4:
        return False
    alike = key.translate(_LOOKALIKES) == other.translate(_LOOKALIKES)
    return alike or (min(len(key), len(other)) >= 5 and _one_edit_apart(key, other))


def resembling(name: str) -> list[str]:
    """The sources ``name`` is a near miss of (:func:`looks_like`). ``sureon build public`` refuses such a folder in
    ``--source-root`` rather than skip it without a word."""
    return [source for source in registry() if looks_like(name, source)]


def sample_writers() -> dict[str, Callable[[Path], None]]:
    """name -> ``write(root)`` producing a tiny copy of the source in its native layout."""
    return {name: module.write for name, module in _discover("public_converters.samples").items()}


def sample_module(name: str):
    return importlib.import_module(f"public_converters.samples.{name}")


def sources_markdown() -> str:
    """The README's source table, generated from the specs so it cannot drift from the code."""
    lines = [
        "| source | `--source` name | branch | capabilities | where to get it | licence | not yet confirmed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for spec in registry().values():
        capabilities = ", ".join(c.removeprefix("has_").replace("_", " ") for c in sorted(spec.capabilities))
        unconfirmed = "; ".join(spec.unconfirmed) or "-"
        cells = [
            spec.title,
            f"`{spec.name}`",
            " + ".join(spec.branches),
            capabilities,
            spec.homepage or "-",
            spec.license or "unknown",
            unconfirmed,
        ]
        lines.append("| " + " | ".join(cell.replace("|", "/").replace("\n", " ") for cell in cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(sources_markdown(), end="")
