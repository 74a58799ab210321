"""Which folder holds each source of ``sureon build public``: ``--source NAME=DIR`` pairs and ``--source-root``.

A source folder must be named exactly as the source; a sub-folder of ``--source-root`` that is a near miss of a
source's name (``Cholec80``, ``cholec_80``, ``Cholec8O``) is refused rather than silently left out. Apart from the
build because it only reads folder names: every mistake here is reported before a source is read.
"""

from pathlib import Path

from builders.arguments import key_values
from builders.errors import InputError
from public_converters.spec import get_source, registry, resembling


def _root_folders(source_root: Path, given: set[str]) -> tuple[dict[str, Path], list[str]]:
    """(source -> folder) of the sub-folders of ``--source-root`` named exactly after a source, and the names of the
    others. A sub-folder that is a near miss of a source (``Cholec80``, ``cholec_80``, ``Cholec8O``) is refused,
    alone (the source would silently be absent) or beside the exact one (which of the two is the data?), unless
    ``--source NAME=DIR`` says which folder that source is."""
    if not source_root.exists():
        raise InputError(
            f"--source-root {source_root} does not exist: give the folder holding one sub-folder per source, named "
            f"as the source (e.g. {source_root / 'cholec80'})"
        )
    if not source_root.is_dir():
        raise InputError(
            f"--source-root {source_root} is a file, not a folder: give the folder holding one sub-folder per "
            "source, or --source NAME=DIR"
        )
    folders = sorted(p for p in source_root.iterdir() if p.is_dir() and not p.name.startswith("."))
    known = registry()
    exact = {p.name: p for p in folders if p.name in known}
    problems, others = [], []
    for folder in folders:
        if folder.name in known:
            continue
        others.append(folder.name)
        for source in resembling(folder.name):
            if source in given:
                continue  # --source NAME=DIR chose that source's folder
            if source in exact:
                problems.append(
                    f"folder {folder.name!r} looks like the source {source!r}, whose folder {source!r} is there too: "
                    f"only {source!r} would be read; move or rename {folder.name!r} (or choose one with "
                    f"--source {source}=DIR)"
                )
            else:
                problems.append(
                    f"folder {folder.name!r} looks like the source {source!r} but is not named {source!r}, so "
                    f"{source} would be left out of the build: rename the folder to {source!r} (source folders are "
                    "named exactly as the source)"
                )
    if problems:
        raise InputError(f"--source-root {source_root}: " + "; ".join(problems))
    return exact, others


def source_folders(pairs: list[str] | None, source_root: Path | None) -> dict[str, Path]:
    """``--source NAME=DIR`` pairs plus every sub-folder of ``--source-root`` named after a known source (a
    ``--source`` pair wins over the root's folder of the same name); every folder must exist."""
    sources = {name: Path(folder) for name, folder in key_values(pairs, "--source", "cholec80=/data/cholec80").items()}
    for name, folder in sources.items():
        get_source(name)  # an unknown name (with a suggestion) before any folder is looked at
        if not folder.is_dir():
            what = "is a file, not a folder" if folder.exists() else "does not exist"
            raise InputError(f"--source {name}={folder}: {folder} {what}; give the folder of the {name} release")
    others: list[str] = []
    if source_root is not None:
        found, others = _root_folders(source_root, set(sources))
        for name, folder in found.items():
            sources.setdefault(name, folder)
    if not sources:
        if source_root is None:
            raise InputError("no sources: give --source NAME=DIR (repeatable) or --source-root DIR")
        listed = ", ".join(others[:8]) + (", ..." if len(others) > 8 else "")
        detail = f"none of its sub-folders ({listed}) is named after a source" if others else "it has no sub-folder"
        raise InputError(
            f"no sources in --source-root {source_root}: {detail}; name each source's folder exactly as the source, "
            f"one of: {', '.join(registry())}"
        )
    return sources
