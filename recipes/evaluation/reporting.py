"""What every report shares: ``NAME=PATH`` arguments, number formats, markdown tables, the settings each run
recorded (its preset, and whether the model was trained on the rows it was scored on), an atomic output folder."""

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from builders.errors import InputError
from builders.prompt import protocol_label


def named_path(spec: str) -> tuple[str | None, Path]:
    """``"name=path"`` -> ``(name, path)``; a bare path -> ``(None, path)`` (the name then comes from the file).

    An existing file whose name contains "=" is taken as a bare path.
    """
    name, sep, path = spec.partition("=")
    if not sep or Path(spec).exists():
        return None, Path(spec)
    if not name.strip() or not path.strip():
        raise InputError(f"{spec!r}: write NAME=PATH or a plain PATH")
    return name.strip(), Path(path)


def pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def signed(value: float | None) -> str:
    """``+21.1`` / ``-2.0``; a gain that rounds to zero prints ``+0.0``, as in the Sureon paper's tables."""
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
    from builders.outputs import staged_output

    with staged_output(out, overwrite) as staging:
        (staging / "report.md").write_text(markdown, encoding="utf-8")
        (staging / "report.json").write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        for file_name, draw in plots:
            draw(staging / file_name)
    return Path(out)


TRAINED_ON_EVALUATED = "trained on the evaluated rows"  # how a report marks a model whose run found contamination


def marked(name: str, contaminated: bool, frames_as: str | None = None) -> str:
    """A model's name as a table shows it: with how its clips were shown where the report's runs differ in it
    (:func:`frames_labels`), and marked when it was trained on the rows it is scored on."""
    name = f"{name} (frames as {frames_as})" if frames_as else name
    return f"{name} ({TRAINED_ON_EVALUATED})" if contaminated else name


FRAMES_SHOWN = ("video", "images")  # how a run's clips reached the model, as its summary.json records it


def frames_labels(runs: dict[str, dict]) -> dict[str, str]:
    """Per run name, how its clips reached the model (one video with its timestamps, or separate images), when the
    report's runs differ in it: the same clips shown the two ways are not the same test, so every table row of such
    a report says which it was. Empty when the runs agree."""
    shown = {name: run["frames_as"] for name, run in runs.items() if run.get("frames_as") in FRAMES_SHOWN}
    return shown if len(set(shown.values())) > 1 else {}


def contamination_section(runs: dict[str, dict]) -> list[str]:
    """The report's section listing every run's contamination findings (none: no section)."""
    from recipes.evaluation.contamination import describe

    lines = [
        f"- {name}, {finding['config'] or 'default'}/{finding['split']}: {describe(finding)}"
        for name, run in runs.items()
        for finding in run.get("contamination") or []
    ]
    if not lines:
        return []
    intro = (
        "The training record stored with these models' weights shows they were trained on rows they are scored on "
        "(each run's summary.json, `contamination`): their scores there are not held out, and the tables mark them."
    )
    return [f"## Models {TRAINED_ON_EVALUATED}", intro, "\n".join(lines)]


def load_run_settings(specs: list[str]) -> dict[str, dict]:
    """Per model name, the settings its run recorded (``run_settings`` of the ``summary.json`` beside its predictions
    file: preset, paper row, model id, backend, request parameters...), its ``frames_as`` as the backend chose it
    (``summary.json``'s own ``frames_as``, which ``--frames-as auto`` resolves), and its ``contamination`` findings
    if it has any; files without one are left out."""
    runs = {}
    for spec in specs:
        name, path = named_path(spec)
        summary_path = path.parent / "summary.json"
        if not summary_path.is_file():
            continue
        try:
            summary = json.loads(summary_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise InputError(f"{summary_path}: not valid JSON ({err.msg})") from None
        if isinstance(summary, dict) and isinstance(summary.get("run_settings"), dict):
            run = summary["run_settings"] | {"predictions": str(path)}
            if summary.get("frames_as") in FRAMES_SHOWN:
                run["frames_as"] = summary["frames_as"]
            if summary.get("contamination"):
                run["contamination"] = summary["contamination"]
            runs[name or str(summary.get("model"))] = run
    return runs


def runs_table(runs: dict[str, dict]) -> str:
    """Each run's recorded settings: its preset and the paper row it reproduces, model id, backend, frames (a run
    shown fewer than the benchmark's protocol says so), budget, request parameters and the flags that replaced a
    preset value."""
    rows = []
    for name, run in runs.items():
        params = ", ".join(f"{k}={json.dumps(v)}" for k, v in (run.get("request_params") or {}).items())
        judge = run.get("judge") or {}
        rows.append(
            [
                name,
                run.get("preset") or "—",
                run.get("paper_row") or "—",
                str(run.get("model")) + (" (unconfirmed id)" if run.get("unconfirmed_id") else ""),
                str(run.get("revision") or "—"),
                str(run.get("backend")),
                f"{run.get('frames_as')}, ≤ {run.get('max_frames') or '—'}{protocol_label(run.get('frames'))}",
                str(run.get("max_new_tokens")),
                params or "—",
                ", ".join(run.get("overrides") or []) or "—",
                judge.get("model") or "—",
            ]
        )
    header = ["Model", "preset", "Table 3 row", "model id", "revision", "backend", "frames", "max new tokens"]
    header += ["request params", "overrides", "judge"]
    return markdown_table(header, rows)
