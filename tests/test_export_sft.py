"""`sureon export sft`: Sureon and public-corpus rows as ms-swift JSONL and LLaVA / qwen-vl-finetune JSON read back
through our own mixture reader with the prompt text and the frames our training renders."""

import json
from pathlib import Path

import pytest

from builders.hub import resolve_frames
from public_converters.build import BuildOptions, build_public
from public_converters.clips import SamplingConfig
from public_converters.spec import sample_module
from recipes.export.sft import export_sft, load_rows, render
from recipes.training.mixture import MixtureSource, load_source, to_example
from sureon.cli import main as cli_main


@pytest.fixture(scope="module")
def public_corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    sources = {}
    for name in ("cholec80", "endoscapes"):
        sample_module(name).write(root / name)
        sources[name] = root / name
    out = tmp_path_factory.mktemp("corpus") / "public"
    sampling = SamplingConfig(min_seconds=4, max_seconds=12, grid_fps=2)
    build_public(BuildOptions(sources=sources, out=out, sampling=sampling))
    return out


def parts_of(example) -> list:
    """The prompt as the chat template sees it: consecutive text joined, each image as ("image", bytes)."""
    parts: list = []
    for message in example.prompt:
        content = message["content"]
        for part in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if part["type"] == "text":
                if parts and isinstance(parts[-1], str):
                    parts[-1] += part["text"]
                else:
                    parts.append(part["text"])
            else:
                image = part["image"]
                data = image["bytes"] if isinstance(image, dict) else Path(image).read_bytes()
                parts.append(("image", data))
    return parts


def llava_as_messages(row: dict) -> dict:
    roles = {"human": "user", "gpt": "assistant"}
    messages = [{"role": roles[turn["from"]], "content": turn["value"]} for turn in row["conversations"]]
    return {"id": row["id"], "messages": messages, "images": row["image"]}


def originals(dataset: Path, config: str, split: str) -> list:
    """Our training examples of the build, frames as tagged images (what the export renders)."""
    rows, root = load_rows(str(dataset), config, split)
    return [to_example(resolve_frames(row, root), "video_qa", blind=False, frames_as="images") for row in rows]


def exported_examples(path: Path, fmt: str) -> list:
    if fmt == "swift":
        loaded = load_source(MixtureSource(path="json", data_files=str(path), split="train"))
        assert loaded.format == "messages"
        return [to_example(row, loaded.format, blind=False, frames_as="images") for row in loaded.dataset]
    rows = json.loads(path.read_text())
    return [to_example(llava_as_messages(row), "messages", blind=False, frames_as="images") for row in rows]


@pytest.mark.parametrize("config, split", [("db", "train"), ("bench", "test")])  # frames as files / embedded
@pytest.mark.parametrize("fmt", ["swift", "llava"])
def test_sureon_rows_read_back_with_our_prompt_text_and_frames(sureon_build, tmp_path, fmt, config, split):
    out = tmp_path / f"sureon.{'jsonl' if fmt == 'swift' else 'json'}"
    argv = [
        "export",
        "sft",
        "--format",
        fmt,
        "--dataset",
        str(sureon_build.out),
        "--config",
        config,
        "--split",
        split,
        "--out",
        str(out),
    ]
    assert cli_main(argv + (["--allow-evaluation-data"] if config == "bench" else [])) == 0
    ours = originals(sureon_build.out, config, split)
    theirs = exported_examples(out, fmt)
    assert [e.key for e in theirs] == [e.key for e in ours]
    assert [e.target for e in theirs] == [e.target for e in ours]
    assert [parts_of(e) for e in theirs] == [parts_of(e) for e in ours]
    first = parts_of(theirs[0])
    assert first[0].startswith("Clip: ") and "\nFrame at " in first[0] and first[1][0] == "image"
    manifest = json.loads(out.with_name(f"{out.name}.manifest.json").read_text())
    assert manifest["rows_read"] == len(ours) == manifest["rows_written"] + manifest["rows_skipped"]
    frames = {Path(p) for row in _raw_rows(out, fmt) for p in _images(row, fmt)}
    assert frames and all(p.is_file() for p in frames)
    # db stores its frames as files under the build's media/ (the training layout): they are referenced in place;
    # embedded JPEG bytes would be written once each under <stem>_frames/
    exported = out.with_name(f"{out.stem}_frames")
    in_media = {p for p in frames if p.is_relative_to(sureon_build.out / "media")}
    assert all(p in in_media or p.parent.parent == exported for p in frames)
    assert manifest["frame_files"] == len(frames - in_media) == len(list(exported.rglob("*.jpg")))
    assert (in_media == frames) if config == "db" else not in_media


def _raw_rows(path: Path, fmt: str) -> list[dict]:
    text = path.read_text()
    return [json.loads(line) for line in text.splitlines()] if fmt == "swift" else json.loads(text)


def _images(row: dict, fmt: str) -> list[str]:
    return row["images"] if fmt == "swift" else row["image"]


@pytest.mark.parametrize("config", ["clip", "image"])
def test_public_corpus_rows_reference_the_media_files_in_place(public_corpus, tmp_path, config):
    out = tmp_path / "public.jsonl"
    export_sft(str(public_corpus), out, fmt="swift", config=config)
    ours = originals(public_corpus, config, "train")
    theirs = exported_examples(out, "swift")
    assert len(theirs) == len(ours) > 0
    assert [parts_of(e) for e in theirs] == [parts_of(e) for e in ours]
    assert [e.target for e in theirs] == [e.target for e in ours]
    paths = [Path(p) for row in _raw_rows(out, "swift") for p in row["images"]]
    assert paths and all(p.is_relative_to(public_corpus.resolve() / "media") for p in paths)
    assert not out.with_name("public_frames").exists()  # nothing copied
    if config == "clip":
        assert all(parts_of(e)[0].startswith("Clip: ") for e in theirs)


def test_two_exports_are_byte_identical_and_overwrite_is_explicit(sureon_build, tmp_path):
    first, second = tmp_path / "a" / "db.jsonl", tmp_path / "b" / "db.jsonl"
    for out in (first, second):
        export_sft(str(sureon_build.out), out, fmt="swift", config="db")
    assert first.read_text().replace(str(first.parent), "") == second.read_text().replace(str(second.parent), "")
    with pytest.raises(FileExistsError, match="--overwrite"):
        export_sft(str(sureon_build.out), first, fmt="swift", config="db")
    before = first.read_bytes()
    export_sft(str(sureon_build.out), first, fmt="swift", config="db", overwrite=True)
    assert first.read_bytes() == before


def test_a_literal_image_token_in_the_text_is_an_error_naming_the_row():
    record = {"question_id": "q1", "question": "What does <image> show?", "options": ["a", "b"], "answer_index": 0}
    with pytest.raises(ValueError, match="row 7 .*<image>"):
        render(record, "row 7 (q1)")
    text, frames, target = render({**record, "question": "What is shown?"}, "row 7 (q1)")
    assert text.startswith("Question: What is shown?\nOptions:\nA. a\nB. b") and frames == [] and target == "A"


def test_without_config_a_sureon_build_exports_db_and_evaluation_data_is_refused(sureon_build, tmp_path, capsys):
    """The usage line says `[--config db]`: db is the default; bench and the validation pools are not training data
    unless --allow-evaluation-data says so (one line, exit 2, nothing written)."""
    build = str(sureon_build.out)
    out = tmp_path / "default.jsonl"
    assert cli_main(["export", "sft", "--format", "swift", "--dataset", build, "--out", str(out)]) == 0
    manifest = json.loads(out.with_name(f"{out.name}.manifest.json").read_text())
    db = next(report for report in sureon_build.configs if report.name == "db")
    assert manifest["config"] == "db" and manifest["rows_written"] == db.written > 0
    capsys.readouterr()
    for config, split in (("bench", "test"), ("validation", "validation"), ("validation_curated", "validation")):
        refused = tmp_path / f"{config}.jsonl"
        argv = ["export", "sft", "--format", "swift", "--dataset", build, "--config", config, "--split", split]
        assert cli_main([*argv, "--out", str(refused)]) == 2
        error = capsys.readouterr().err.strip()
        assert f"({config}/{split}) is evaluation data" in error and "--allow-evaluation-data" in error
        assert "\n" not in error and not refused.exists() and not list(tmp_path.glob(f"{config}*"))
    assert cli_main([*argv, "--out", str(refused), "--allow-evaluation-data"]) == 0 and refused.is_file()


def test_a_public_build_without_config_is_told_which_to_give(public_corpus, tmp_path, capsys):
    out = tmp_path / "public.jsonl"
    assert cli_main(["export", "sft", "--format", "swift", "--dataset", str(public_corpus), "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert "--config image or --config clip" in error and not out.exists()
    argv = ["export", "sft", "--format", "swift", "--dataset", str(public_corpus), "--out", str(out)]
    assert cli_main([*argv, "--config", "bench-cholec80-phase-frame", "--split", "test"]) == 2
    assert "is evaluation data" in capsys.readouterr().err and not out.exists()
