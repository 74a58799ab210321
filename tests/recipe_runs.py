"""Running the project's recipes as a user does, for the learning tests: the recipe YAML with a few overrides through
the script's own parser and ``main``, and ``sureon eval sureon --mode both``, on one BLAS thread."""

import json
from contextlib import contextmanager
from pathlib import Path

import yaml

from sureon.cli import main as sureon


REPO = Path(__file__).resolve().parents[1]


@contextmanager
def one_thread():
    """Tiny models train several times faster on one BLAS thread (what `sureon reproduce` runs them with)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train(script: str, recipe: Path, out: Path, **overrides) -> Path:
    """The recipe YAML with ``overrides``, run through the script's own parser and ``main``."""
    import importlib.util

    config = yaml.safe_load(recipe.read_text()) | {"output_dir": str(out), "report_to": "none"} | overrides
    path = out.with_suffix(".yaml")
    path.write_text(yaml.safe_dump(config))
    spec = importlib.util.spec_from_file_location(f"recipe_{script}", REPO / "recipes" / f"{script}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with one_thread():
        args = module.make_parser().parse_args_and_config(["--config", str(path)])
        return Path(module.main(*args, recipe=str(path)))


def evaluate(model: Path, build: Path, out: Path) -> dict:
    with one_thread():
        assert (
            sureon(
                [
                    "eval",
                    "sureon",
                    "--model",
                    str(model),
                    "--dataset",
                    str(build),
                    "--mode",
                    "both",
                    "--out",
                    str(out),
                    "--max-new-tokens",
                    "4",
                ]
            )
            == 0
        )
    return json.loads((out / "summary.json").read_text())["modes"]
