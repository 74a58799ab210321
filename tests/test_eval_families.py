"""`sureon eval sureon` through the transformers backend on a tiny stand-in of every open family people evaluate
(Qwen3-VL Instruct and Thinking, Qwen2.5-VL, Gemma 3, Gemma 4, Molmo2, InternVL, LLaVA-OneVision), visual and blind,
with a system prompt, on the demo benchmark: each sent frame is in the prompt as that family's image tokens, blind
prompts hold none, the system prompt reaches families whose template has no system role, outputs are parsed.
"""

import json
import math
import re

import pytest
from tiny_families import FAMILIES, build_tiny_family

from builders.prompt import format_messages
from recipes.evaluation.inference import TransformersBackend
from recipes.evaluation.inference.transformers_backend import decode_generations
from recipes.model_io.answers import parse_answer
from sureon.cli import main as cli_main


SYSTEM = "You are a careful surgical assistant."


@pytest.fixture(scope="module")
def module_tmp(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("families")
    with pytest.MonkeyPatch.context() as patch:  # datasets' cache out of the user's home for module fixtures
        import datasets

        patch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp / "hf_datasets_cache")
        yield tmp


@pytest.fixture(scope="module")
def records(bench, module_tmp):  # module_tmp: load_dataset caches there
    from datasets import load_dataset

    return list(load_dataset(str(bench), "bench", split="test"))


@pytest.fixture(scope="module")
def family_dir(module_tmp):
    """Each family's stand-in, built the first time a test asks for it and kept for the module."""
    built = {}

    def build(name):
        if name not in built:
            built[name] = build_tiny_family(name, module_tmp / "models" / name)
        return built[name]

    return build


RUNS = [(name, "images") for name in FAMILIES] + [(name, "video") for name in FAMILIES if FAMILIES[name].video_token]


def _count(text: str, token: str) -> int:
    return text.count(token) if token else 0


@pytest.mark.parametrize(("name", "frames_as"), RUNS, ids=[f"{n}-{f}" for n, f in RUNS])
def test_family_evaluates_visual_and_blind_with_its_image_tokens(
    name, frames_as, family_dir, bench, records, tmp_path
):
    family = FAMILIES[name]
    model = family_dir(name)
    out = tmp_path / "eval"
    argv = ["eval", "sureon", "--model", str(model), "--dataset", str(bench), "--mode", "both", "--out", str(out)]
    # 4 questions in batches of 3: one batch mixes visual and blind prompts
    argv += ["--frames-as", frames_as, "--limit", "4", "--batch-size", "3", "--max-new-tokens", "4"]
    assert cli_main([*argv, "--system-prompt", SYSTEM]) == 0
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert {(p["question_id"], p["mode"]) for p in predictions} == {
        (r["question_id"], mode) for r in records[:4] for mode in ("visual", "blind")
    }
    by_id = {r["question_id"]: r for r in records}
    for p in predictions:
        expected = parse_answer(by_id[p["question_id"]], p["raw_output"], p["answer"])
        assert (p["parsed"], p["correct"]) == (expected.parsed, expected.correct)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["system_prompt"] == SYSTEM and summary["generation"]["generated"] == 8

    backend = TransformersBackend(str(model), frames_as=frames_as)
    tokenizer = backend.processor.tokenizer
    for record in records:
        n = len(record["frames"])
        visual = format_messages(record, frames_as=frames_as, system_prompt=SYSTEM)
        blind = format_messages(record, blind=True, frames_as=frames_as, system_prompt=SYSTEM)
        visual_text, blind_text = tokenizer.batch_decode(backend.prepare([visual, blind])["input_ids"])
        for token in {family.image_token, family.video_token, family.image_marker} - {None, ""}:
            assert token not in blind_text
        for text in (visual_text, blind_text):
            assert text.count(SYSTEM) == 1
            if not family.system_role:  # merged into the first user turn, a blank line after it
                assert f"{SYSTEM}\n\n" in text
        if frames_as == "images":
            # tokens per frame from a two-frame prompt: LLaVA-OneVision tiles a lone image (anyres) but not the
            # images of a multi-image prompt
            two = {**record, "frames": record["frames"][:2], "frame_timestamps": record["frame_timestamps"][:2]}
            two_text = tokenizer.decode(backend.prepare([format_messages(two)])["input_ids"][0])
            per_frame, odd = divmod(two_text.count(family.image_token), 2)
            assert per_frame > 0 and not odd
            assert visual_text.count(family.image_token) == n * per_frame
            if family.image_marker:
                assert visual_text.count(family.image_marker) == n
        else:
            assert visual_text.count(family.video_token) > 0
            if family.video_marker:
                markers = re.findall(family.video_marker, visual_text)
                assert len(markers) == math.ceil(n / family.frames_per_video_marker)
    if family.thinking:
        assert visual_text.endswith("<|im_start|>assistant\n<think>\n")


def test_gemma3_batch_mixing_visual_and_blind_prompts_gets_one_image_list_per_prompt(family_dir, records):
    """The reported failure: `Found [8, 8, 8, 0, 0, 0] <start_of_image> tokens and [24] images per sample`."""
    backend = TransformersBackend(str(family_dir("gemma3")), frames_as="images")
    batch = [format_messages(r) for r in records[:3]] + [format_messages(r, blind=True) for r in records[:3]]
    inputs = backend.prepare(batch)
    texts = backend.processor.tokenizer.batch_decode(inputs["input_ids"])
    assert [t.count("<start_of_image>") for t in texts] == [len(r["frames"]) for r in records[:3]] + [0, 0, 0]
    assert inputs["pixel_values"].shape[0] == sum(len(r["frames"]) for r in records[:3])


@pytest.mark.parametrize("name", ["qwen3-vl-thinking", "gemma4"])
def test_a_thinking_answer_is_parsed_after_its_reasoning(name, family_dir, records):
    """What a thinking model generates, decoded as the backend decodes it: the reasoning is kept in the raw output
    as a think block, and the answer parsed after it. (Qwen3-VL-Thinking's prompt already opens ``<think>``.)"""
    backend = TransformersBackend(str(family_dir(name)))
    tokenizer = backend.processor.tokenizer
    record = next(r for r in records if r.get("options"))
    if name == "gemma4":
        generated = "<|channel>thought\nThe hook is at A, not B.<channel|>C<turn|>"
    else:
        generated = "The hook is at A, not B.\n</think>\n\nC<|im_end|>"
    ids = tokenizer([generated], add_special_tokens=False)["input_ids"]
    (text,) = decode_generations(tokenizer, ids)
    assert "The hook is at A, not B." in text and "<|channel>" not in text
    assert parse_answer(record, text, "C").parsed == "C"


REMOTE_CODE_CONFIGS = {
    # the original Molmo: a model type transformers has no class for, only remote code
    "molmo": (
        {"model_type": "molmo", "architectures": ["MolmoForCausalLM"], "auto_map": {"AutoConfig": "c.MolmoConfig"}},
        r"cannot serve model family 'molmo': its config loads remote code \(AutoConfig\)",
    ),
    # Molmo2 as first published (allenai/Molmo2-4B's config.json layout, sizes trimmed): a native model type, but
    # its vision tower under `vit_config`, which the native Molmo2Config does not read
    "molmo2-remote-layout": (
        {
            "model_type": "molmo2",
            "architectures": ["Molmo2ForConditionalGeneration"],
            "auto_map": {"AutoConfig": "configuration_molmo2.Molmo2Config"},
            "vit_config": {"model_type": "molmo2", "hidden_size": 32, "num_hidden_layers": 1},
            "adapter_config": {"model_type": "molmo2", "hidden_size": 32},
            "text_config": {"model_type": "molmo2_text", "hidden_size": 32, "num_hidden_layers": 1},
        },
        r"cannot serve model family 'molmo2' from this checkpoint: .* \(no vision_config\)",
    ),
}


@pytest.mark.parametrize("kind", list(REMOTE_CODE_CONFIGS))
def test_a_family_the_backend_cannot_serve_is_refused_by_name_before_loading(kind, tmp_path, bench):
    config, message = REMOTE_CODE_CONFIGS[kind]
    model = tmp_path / kind
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=message):
        TransformersBackend(str(model))
    out = tmp_path / "eval"
    assert cli_main(["eval", "sureon", "--model", str(model), "--dataset", str(bench), "--out", str(out)]) == 2
    assert not out.exists()  # nothing written, not even the run folder
