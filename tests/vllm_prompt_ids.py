"""The prompts of a Sureon build's benchmark rows, and the prompt token ids offline vLLM runs for them.

``conversations(build)``: every row's messages, visual and blind, its clip as one video and as images, keyed
``question_id|mode|frames_as`` (what ``sureon eval sureon`` formats). Run in the vLLM environment, this file writes
the token ids vLLM's engine ran for each of them through ``--backend vllm``'s own code (``VLLMBackend.outputs``), for
``tests/test_vllm.py`` to compare with the transformers backend's encoding:

    PYTHONPATH=. build/vllm-venv/bin/python tests/vllm_prompt_ids.py MODEL BUILD OUT.json
"""

import argparse
import json
import sys
from pathlib import Path


FRAMES_AS = ("video", "images")
MODES = ("visual", "blind")


def conversations(build: Path) -> dict[str, list[dict]]:
    from builders.hub import media_root, resolve_frames
    from builders.prompt import format_messages
    from recipes.evaluation.sureon.evaluate import load_benchmark

    dataset = load_benchmark(argparse.Namespace(dataset=str(build), config="bench", split="test", limit=None))
    root = media_root(str(build), dataset)
    return {
        f"{row['question_id']}|{mode}|{frames_as}": format_messages(
            resolve_frames(row, root), blind=mode == "blind", frames_as=frames_as
        )
        for row in dataset
        for mode in MODES
        for frames_as in FRAMES_AS
    }


def main(model: str, build: str, out: str) -> None:
    from vllm import SamplingParams

    from recipes.evaluation.inference import VLLMBackend

    prompts = conversations(Path(build))
    # one engine for both: frames_as only decides whether it also takes a video per prompt
    backend = VLLMBackend(model, dtype="float32", frames_as="video", max_model_len=4096)
    outputs = backend.outputs(list(prompts.values()), SamplingParams(temperature=0.0, max_tokens=1))
    ids = {key: list(output.prompt_token_ids) for key, output in zip(prompts, outputs, strict=True)}
    Path(out).write_text(json.dumps(ids))


if __name__ == "__main__":  # vLLM starts its engine in a spawned process, which imports this file again
    main(*sys.argv[1:])
