"""``recipes/sft.py`` run as ``accelerate launch`` runs it, watched: each stage's trainer, model, optimizer and
DeepSpeed engine (and its ZeRO optimizer) are held by weak references, and when the next stage starts building its
trainer every rank writes down which of the previous stage's objects are still alive (``PROBE_OUT/rank<N>.json``).

Usage (what tests/test_launch_configs.py runs): ``accelerate launch ... tests/launch_probe.py --config RECIPE``, with
``PROBE_OUT`` naming a folder.
"""

import gc
import json
import os
import runpy
import sys
import weakref
from pathlib import Path


REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from recipes.training import sft_stages  # noqa: E402


def main() -> None:
    out = Path(os.environ["PROBE_OUT"])
    out.mkdir(parents=True, exist_ok=True)
    build = sft_stages.build_stage_trainer
    held: dict[str, weakref.ref] = {}
    report = {"stages_built": 0, "alive_when_the_next_stage_started": []}

    def watched(*args, **kwargs):
        if held:
            gc.collect()
            report["alive_when_the_next_stage_started"].append(
                sorted(k for k, ref in held.items() if ref() is not None)
            )
        built = build(*args, **kwargs)
        trainer = built["trainer"]
        held.clear()
        held.update(trainer=weakref.ref(trainer), model=weakref.ref(trainer.model))
        train = trainer.train

        def train_and_watch(*train_args, **train_kwargs):
            result = train(*train_args, **train_kwargs)
            held["optimizer"] = weakref.ref(trainer.optimizer)
            engine = getattr(trainer, "deepspeed", None)
            if engine is not None:
                held["deepspeed_engine"] = weakref.ref(engine)
                held["zero_optimizer"] = weakref.ref(engine.optimizer)  # fp32 master weights and AdamW states
            return result

        trainer.train = train_and_watch
        report["stages_built"] += 1
        return built

    sft_stages.build_stage_trainer = watched
    sys.argv = [str(REPO / "recipes" / "sft.py"), *sys.argv[1:]]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    finally:
        rank = os.environ.get("RANK", "0")
        (out / f"rank{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main()
