"""Running the project as a user does, for the learning tests: a world written and built by ``sureon build sureon``,
the recipe YAML with a few overrides through the script's own parser and ``main``, and ``sureon eval sureon --mode
both``, on one BLAS thread."""

import json
from pathlib import Path

import yaml

from recipes.training.plan.tokens import one_thread
from sureon.cli import main as sureon


REPO = Path(__file__).resolve().parents[1]


def tiny_recipe(tmp_path, model, build, **extra) -> str:
    """A recipe YAML for a tiny vision-language ``model`` on the sample ``build``'s Sureon-DB: 8-frame clips at
    48x48, batch 2, with ``extra`` fields; returns its path."""
    recipe = {
        "model_name_or_path": str(model),
        "dataset_mixture": [{"path": str(build.out), "name": "db", "split": "train"}],
        "frames_as": "video",
        "max_frames": 8,
        "video_max_pixels": 8 * 48 * 48,
        "per_device_train_batch_size": 2,
        **extra,
    }
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return str(path)


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


def build_world(root: Path, settings: dict, configs: list[str], *, frames: int | None = None) -> Path:
    """A world (builders/sureon/world/) with ``settings``, written under ``root/world`` and built into
    ``root/build``: with its videos at ``frames`` a clip, or without videos (for blind guessers) when ``None``."""
    from builders.sureon import world

    world.write_world(root / "world", world.WorldConfig.from_dict(settings), videos=frames is not None)
    argv = ["build", "sureon", "--release", str(root / "world" / "release"), "--out", str(root / "build")]
    argv += ["--configs", *configs]
    if frames is not None:
        # the world has no text or face to blur; blurring is for real frames
        argv += ["--videos", str(root / "world" / "videos"), "--no-blur", "--cache-dir", str(root / "cache")]
        argv += ["--max-frames", str(frames), "--min-frames", str(frames)]
    assert sureon(argv) == 0
    return root / "build"
