"""What a public source declares about itself: the data every shared stage needs, next to its reader.

A source module in ``public_converters/sources/`` defines ``SPEC = SourceSpec(...)`` and its ``read`` function; a
sample module of the same name in ``public_converters/samples/`` writes a tiny copy in the native layout (for the
tests and ``make demo``). Nothing else needs editing to add a source: the registry discovers both.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from builders.errors import InputError
from public_converters.schema import BRANCHES, CAPABILITIES, SEG_POLICIES, SourceTables
from public_converters.vocabulary import LabelMapper, check_label_table


@dataclass(frozen=True)
class SourceSpec:
    name: str  # the registry key and the ``--source NAME=DIR`` name, e.g. "cholec80"
    title: str  # as the seed's Table 13 writes it
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
        raise InputError(f"unknown public source {name!r}; known: {', '.join(sources)}")
    return sources[name]


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
