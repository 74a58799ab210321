"""The public-corpus build end to end on the sample copies of every source: what a user of the dataset checks."""

import json
import re
import shutil
from collections import defaultdict

import pyarrow.parquet as pq
import pytest
from datasets import load_dataset
from fake_chat_server import FakeChatServer, Reply, last_user_text

from builders.hub import resolve_frames
from builders.llm import LLMClient
from public_converters.build import BuildOptions, build_public
from public_converters.clips import LabelTimeline, SamplingConfig
from public_converters.grounded import parse_answer
from public_converters.schema import SourceError, read_tables
from public_converters.spec import registry, sample_module
from public_converters.templating import GROUNDED
from recipes.training.mixture import MixtureSource, load_source, to_example


SAMPLING = SamplingConfig(min_seconds=4, max_seconds=12, grid_fps=2)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("sources")
    for name in registry():
        sample_module(name).write(root / name)
    return {name: root / name for name in registry()}


@pytest.fixture(scope="module")
def corpus(sources, tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus") / "public"
    manifest = build_public(BuildOptions(sources=sources, out=out, sampling=SAMPLING))
    return out, manifest


def records(out, branch=None):
    rows = []
    for path in sorted(out.glob(f"data/{branch or '*'}/*/*.parquet")):
        rows += pq.read_table(path).to_pylist()
    return rows


def test_every_source_is_written_with_both_versions(corpus):
    out, manifest = corpus
    assert set(manifest["sources"]) == set(registry())
    for name, info in manifest["sources"].items():
        spec = registry()[name]
        assert set(info["branches_written"]) == set(spec.branches), name
        for summary in info["branches_written"].values():
            assert summary["versions"]["template"] == summary["versions"]["instruction"] > 0
    card = (out / "README.md").read_text()
    for spec in registry().values():
        assert f"(`{spec.name}`)" in card
    for config in ("image", "clip", "image-cholect50", "clip-cholec80"):
        assert len(load_dataset(str(out), config, split="train")) > 0


def test_every_grounded_answer_parses_against_its_source_vocabulary(corpus):
    out, _ = corpus
    grounded = [r for r in records(out) if r["grounded"]]
    assert {r["template_id"] for r in grounded} >= {
        "grounded_tool_localisation",
        "grounded_clip_phase",
        "grounded_triplets",
        "grounded_anatomy_presence",
    }
    for record in grounded:
        shape, kind, key = GROUNDED[record["template_id"]]
        vocabulary = {k: set(v.values()) for k, v in registry()[record["source"]].labels.items()}
        parse_answer(shape, record["answer"], vocabulary, key or kind)
        assert record["answer_format"] == "json"


def test_frames_exist_and_clips_show_timestamped_frames_inside_the_window(corpus):
    out, _ = corpus
    for record in records(out):
        assert all((out / frame).is_file() for frame in record["frames"]), record["qa_id"]
        if record["branch"] == "image":
            assert len(record["frames"]) == 1 and record["start"] is None
        else:
            assert 4 <= len(record["frames"]) <= 8
            assert all(record["start"] - 1e-6 <= t < record["end"] for t in record["frame_timestamps"])


def test_grounded_clip_answers_hold_over_the_whole_window(corpus):
    out, _ = corpus
    checked = 0
    for record in records(out, "clip"):
        if not record["template_id"].startswith("grounded_clip_"):
            continue
        tables, _ = read_tables(out / "normalised" / record["source"])
        kind = record["template_id"].removeprefix("grounded_clip_")
        timeline = LabelTimeline([s for s in tables.segments if s.video_id == record["video_id"] and s.kind == kind])
        label = timeline.constant_label(record["start_frame"], record["end_frame"])
        assert label is not None and json.loads(record["answer"]) == {kind: label}
        checked += 1
    assert checked > 0


def test_transition_answers_name_the_switch_time(corpus):
    out, _ = corpus
    tables, _ = read_tables(out / "normalised" / "cholec80")
    starts = defaultdict(set)
    for segment in tables.segments:
        if segment.kind == "phase":
            starts[segment.video_id].add(segment.start_frame)
    found = 0
    for record in records(out, "clip"):
        if record["source"] != "cholec80" or record["template_id"] != "phase_transition_temporal":
            continue
        seconds = float(re.search(r"at about ([\d.]+) s into the clip", record["answer"]).group(1))
        switch = [f for f in starts[record["video_id"]] if record["start_frame"] < f <= record["end_frame"]]
        assert len(switch) == 1 and abs((switch[0] - record["start_frame"]) / 25 - seconds) < 0.05
        found += 1
    assert found > 0


def test_manifest_counts_reconcile_with_the_normalised_frames(corpus):
    out, manifest = corpus
    for name in ("cholect50", "endoscapes", "cholecseg8k"):
        tables, _ = read_tables(out / "normalised" / name)
        info = manifest["sources"][name]
        assert info["items"]["image"] + sum(info["skipped"]["image"].values()) == len(tables.frames)
        assert info["branches_written"]["image"]["items"] == info["items"]["image"]


def test_records_train_through_the_mixture_with_their_frames(corpus):
    out, _ = corpus
    for config in ("image", "clip"):
        loaded = load_source(MixtureSource(path=str(out), name=config))
        assert loaded.format == "video_qa" and loaded.media_root == out
        row = resolve_frames(loaded.dataset[0], loaded.media_root)
        example = to_example(row, loaded.format, blind=False, frames_as="video")
        visual = [p for p in example.prompt[-1]["content"] if p["type"] in ("image", "video")]
        assert len(visual) == 1 and visual[0]["type"] == ("image" if config == "image" else "video")
        assert example.target == row["answer"]


def test_builds_are_byte_identical_and_num_proc_does_not_change_them(sources, tmp_path):
    subset = {name: sources[name] for name in ("cholec80", "cholecseg8k", "endoscapes", "grasp")}
    first = tmp_path / "one"
    build_public(BuildOptions(sources=subset, out=first, sampling=SAMPLING, cache_dir=tmp_path / "cache"))
    second = tmp_path / "two"
    build_public(BuildOptions(sources=subset, out=second, sampling=SAMPLING, num_proc=2, cache_dir=tmp_path / "c2"))
    files = sorted(p.relative_to(first) for p in first.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(second) for p in second.rglob("*") if p.is_file())
    for relative in files:
        assert (first / relative).read_bytes() == (second / relative).read_bytes(), relative


def test_a_bad_file_in_any_source_leaves_nothing_written(sources, tmp_path):
    copy = tmp_path / "cholecseg8k"
    shutil.copytree(sources["cholecseg8k"], copy)
    culprit = sample_module("cholecseg8k").BAD_INPUTS["truncated_image"](copy)
    out = tmp_path / "out"
    with pytest.raises(SourceError, match=re.escape(culprit)):
        build_public(
            BuildOptions(sources={"cholec80": sources["cholec80"], "cholecseg8k": copy}, out=out, sampling=SAMPLING)
        )
    assert not out.exists() and not any(p.name.startswith(".out") for p in tmp_path.iterdir())


# ---- paraphrase ----------------------------------------------------------------------------------------------------


def paraphraser(body, index):
    """Rephrases faithfully, except that binary questions lose their class name (a paraphrase to reject); the third
    call fails once with a 503 (retried)."""
    if index == 2:
        return Reply(status=503, raw="busy")
    payload = json.loads(last_user_text(body))
    question = "Please tell me: " + payload["question"][0].lower() + payload["question"][1:]
    if question.split(": ", 1)[1].startswith(("is a ", "is the ")):
        question = "Please tell me: is some structure or instrument visible in this image?"
    reply = {"question": question}
    if "answer" in payload:
        reply["answer"] = payload["answer"]
    return Reply(content=json.dumps(reply), delay=0.01)


def test_paraphrase_stage_against_a_chat_server(sources, tmp_path):
    subset = {"cholecseg8k": sources["cholecseg8k"]}
    with FakeChatServer(paraphraser) as server:

        def client():
            return LLMClient(
                base_url=server.url, api_key="k", cache=tmp_path / "llm.sqlite", max_concurrency=3, backoff=0.0
            )

        manifest = build_public(BuildOptions(sources=subset, out=tmp_path / "a", paraphrase_client=client()))
        stats = manifest["sources"]["cholecseg8k"]["paraphrase"]
        assert stats["requested"] == stats["accepted"] + stats["rejected"] + stats.get("failed", 0)
        assert stats["rejected"] > 0 and stats["accepted"] > 0 and not stats.get("failed")
        assert server.max_in_flight <= 3
        first_bodies = [b for b in server.requests]
        assert first_bodies[0]["temperature"] == 0.7 and first_bodies[0]["top_p"] == 0.8
        assert first_bodies[0]["top_k"] == 20 and first_bodies[0]["max_tokens"] == 256
        served = server.served
        rerun = build_public(BuildOptions(sources=subset, out=tmp_path / "b", paraphrase_client=client()))
        assert server.served == served  # everything came from the cache
        assert rerun["sources"]["cholecseg8k"]["paraphrase"] == stats
    rows = records(tmp_path / "a")
    originals = {r["qa_id"][:-2]: r for r in rows if r["version"] == "template"}
    paraphrased = [r for r in rows if r["version"] == "paraphrase"]
    assert len(paraphrased) == stats["accepted"]
    for row in paraphrased:
        original = originals[row["qa_id"][:-2]]
        assert row["question"].startswith("Please tell me: ")
        assert row["answer"] == original["answer"]  # structured answers copied verbatim, others kept by this server


def test_video_frames_feed_the_image_branch_only_where_the_source_says_so(corpus):
    out, manifest = corpus
    heichole = [r for r in records(out, "image") if r["source"] == "heichole"]
    assert heichole and all(r["file"].endswith(".mp4") for r in heichole)  # decoded from the video
    autolaparo = manifest["sources"]["autolaparo"]  # its 1-fps phase rows label clips, not images
    assert autolaparo["skipped"]["image"]["frame without an image"] > 0
    assert all(r["file"].endswith((".jpg", ".png")) for r in records(out, "image") if r["source"] == "autolaparo")


def test_media_is_written_once_and_a_rerun_decodes_nothing(sources, tmp_path):
    import numpy as np
    from PIL import Image

    from public_converters.media import media_name, write_media
    from public_converters.normalise import normalise_source
    from public_converters.records import build_source

    normalised = normalise_source(registry()["cholecseg8k"], sources["cholecseg8k"])
    built = build_source(normalised, SamplingConfig())
    outlines = [(job, o) for job in built.jobs for o in job.outlines]
    expected = sum(len(job.frames) for job in built.jobs) + len(outlines)
    assert outlines and write_media(built.jobs, tmp_path / "cache") == expected
    assert write_media(built.jobs, tmp_path / "cache") == 0  # resumed: everything is in the cache

    def greenness(name):  # how much green dominates, summed over the image
        pixels = np.asarray(Image.open(tmp_path / "cache" / name).convert("RGB")).astype(int)
        return int(np.clip(pixels[..., 1] - (pixels[..., 0] + pixels[..., 2]) / 2, 0, None).sum())

    job, (frame_index, _, _, name) = outlines[0]
    plain = greenness(media_name("cholecseg8k", job.video_id, frame_index))
    assert greenness(name) - plain > 5000  # the same frame, plus a green contour (about 25+ pure-green pixels)
