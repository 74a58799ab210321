"""What every report shares: ``NAME=PATH`` arguments, number formats, markdown tables, an atomic output folder."""

import json
from collections.abc import Callable, Sequence
from pathlib import Path


def named_path(spec: str) -> tuple[str | None, Path]:
    """``"name=path"`` -> ``(name, path)``; a bare path -> ``(None, path)`` (the name then comes from the file).

    An existing file whose name contains "=" is taken as a bare path.
    """
    name, sep, path = spec.partition("=")
    if not sep or Path(spec).exists():
        return None, Path(spec)
    if not name.strip() or not path.strip():
        raise ValueError(f"{spec!r}: write NAME=PATH or a plain PATH")
    return name.strip(), Path(path)


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def signed(value: float | None) -> str:
    """``+21.1`` / ``-2.0``; a gain that rounds to zero prints ``+0.0``, as in the seed's tables."""
    if value is None:
        return "—"
    rounded = round(value, 1)
    return f"{rounded + 0.0:+.1f}"


def interval(bounds: Sequence[float] | None) -> str:
    return "—" if bounds is None else f"[{bounds[0]:.1f}, {bounds[1]:.1f}]"


def pvalue(p: float) -> str:
    return "<0.001" if p < 0.001 else f"{p:.4f}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_report(
    out: str | Path,
    markdown: str,
    data: dict,
    overwrite: bool,
    plots: Sequence[tuple[str, Callable[[Path], None]]] = (),
) -> Path:
    """Write ``report.md``, ``report.json`` and each ``(file name, draw(path))`` plot into ``out``, atomically."""
    from builders.hub import staged_output

    with staged_output(out, overwrite) as staging:
        (staging / "report.md").write_text(markdown, encoding="utf-8")
        (staging / "report.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        for file_name, draw in plots:
            draw(staging / file_name)
    return Path(out)
