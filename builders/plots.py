"""Matplotlib for cards and reports: the headless backend, and PNGs that are byte-identical across runs."""

from pathlib import Path


def pyplot():
    """``matplotlib.pyplot`` on the Agg backend (no display needed), imported only when a plot is drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path) -> None:
    """Lay out, write as PNG without the software/version tag (so two runs write the same bytes), and close."""
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})
    pyplot().close(fig)
