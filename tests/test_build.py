"""End to end: the sample release + videos -> Hub-layout folder -> load_dataset, card, manifest, determinism."""

import io
import json
import re
import shutil
from pathlib import Path

import pytest
import yaml
from datasets import get_dataset_config_names, load_dataset
from PIL import Image

from builders.card import STAT_ROWS, video_qa_stats
from builders.errors import InputError
from builders.sureon.build import CONFIGS, BuildOptions, build_sureon
from builders.sureon.frames import FramePolicy, plan_frame_indices
from builders.sureon.release import ReleaseError, read_release
from sample_data.make_sample_release import release_rows
from sample_data.make_videos import read_frame_index, write_video
from sureon.cli import main as cli_main


def build(tmp_path, release, videos=None, name="out", **kwargs):
    options = BuildOptions(
        release=release, out=tmp_path / name, videos=videos, cache_dir=tmp_path / f"{name}-cache", **kwargs
    )
    return build_sureon(options)


@pytest.fixture
def built(sureon_build):
    return sureon_build


def load_config(folder, config):
    return load_dataset(str(folder), config, split=CONFIGS[config].split)


def test_every_config_round_trips_through_load_dataset(built):
    assert get_dataset_config_names(str(built.out)) == list(CONFIGS)
    manifest = json.loads((built.out / "build_manifest.json").read_text())
    expected = {"bench": 11, "db": 14, "train_all": 20, "validation": 10, "validation_curated": 7}
    assert manifest["frames"]["layout"] == {
        "bench": "embedded",
        "db": "files",
        "train_all": "files",
        "validation": "embedded",
        "validation_curated": "embedded",
    }
    for config in CONFIGS:
        ds = load_config(built.out, config)
        assert len(ds) == manifest["configs"][config]["written"] == expected[config]
        kind = {"files": "Value", "embedded": "Image"}[manifest["frames"]["layout"][config]]
        assert ds.features["frames"].feature.__class__.__name__ == kind
        assert len(set(ds["question_id"])) == len(ds)


def test_curated_configs_keep_passing_questions_and_sm_passthroughs(built):
    db = load_config(built.out, "db")
    assert all(
        f is True or (f is None and c == "SM")
        for f, c in zip(db["passes_blind_curation"], db["category"], strict=True)
    )
    assert None in db["passes_blind_curation"]  # the flag's third state is kept, not coerced
    train = release_rows()["train"]
    assert len(db) == sum(
        r["passes_blind_curation"] is True
        or (r["passes_blind_curation"] is None and r["category"] == "sequence_summarization")
        for r in train
    )


def test_frames_counts_timestamps_and_which_frames(built, fps_of):
    for config in ("bench", "validation"):
        ds = load_config(built.out, config)
        for record in ds:
            fps = fps_of[record["source_id"]]
            assert 4 <= len(record["frames"]) == len(record["frame_timestamps"]) <= 8
            assert all(record["start"] <= t <= record["end"] for t in record["frame_timestamps"])
            painted = [read_frame_index(image) for image in record["frames"]]
            num_frames = 90 * fps
            assert painted == plan_frame_indices(record["start"], record["end"], fps, num_frames, FramePolicy())
            assert record["frame_timestamps"] == pytest.approx([i / fps for i in painted])


def test_bench_keeps_the_release_answers(built):
    bench = load_config(built.out, "bench")
    released = {r["question_id"]: r for r in release_rows()["test"]}
    for record in bench:
        row = released[record["question_id"]]
        assert record["answer"] == row["answer"]
        if row["options"]:
            assert row["options"][record["answer_index"]]["correct"] and record["answer_format"] == "mcq"
        else:
            assert record["answer_index"] == -1
    # 340 questions over 335 clips in the real benchmark: here too a clip carries two questions
    assert len(set(bench["clip_id"])) == len(bench) - 1


def test_missing_video_skip_writes_a_manifest_and_counts_reconcile(built, capsys):
    manifest = json.loads((built.out / "build_manifest.json").read_text())
    for config, entry in manifest["configs"].items():
        assert entry["read"] == entry["written"] + len(entry["skipped"]), config
    assert manifest["configs"]["bench"]["skipped"] == [
        {"question_id": "sureon_test_0041", "source_id": "MissingVid1", "reason": "video not found"}
    ]
    assert "skipped      1" in built.summary()


def test_card_statistics_equal_the_data(built):
    card = (built.out / "README.md").read_text()
    header = yaml.safe_load(card.split("---")[1])
    assert [c["config_name"] for c in header["configs"]] == list(CONFIGS)
    manifest = json.loads((built.out / "build_manifest.json").read_text())
    table = {}
    for key, label in STAT_ROWS:
        match = re.search(rf"^\| {re.escape(label)} \|(.*)\|$", card, flags=re.MULTILINE)
        table[key] = [cell.strip() for cell in match.group(1).split("|")]
    for position, config in enumerate(CONFIGS):
        ds = load_config(built.out, config).remove_columns(["frames"])
        stats = video_qa_stats(list(ds))
        assert stats == manifest["stats"][config]
        for key, _ in STAT_ROWS:
            assert table[key][position] == str(stats[key]), (config, key)
        assert f"| `{config}` | {CONFIGS[config].split} | {len(ds)} |" in card
    assert (built.out / "assets" / "category_distribution.png").stat().st_size > 1000
    bench = manifest["stats"]["bench"]
    assert bench["short_long_categories"] == "7 / 3" and bench["mcq_open_categories"] == "8 / 2"
    assert (bench["accuracy_scored"], bench["open_ended"]) == (10, 1)


def test_two_builds_are_byte_identical(tmp_path, sample_videos, sureon_build):
    from conftest import SAMPLE_RELEASE

    first = sureon_build  # the session's build, from a cold cache of its own with the same options
    second = build(tmp_path, SAMPLE_RELEASE, sample_videos, name="b", on_missing_video="skip")  # its own cold cache
    files_a = sorted(p.relative_to(first.out) for p in first.out.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(second.out) for p in second.out.rglob("*") if p.is_file())
    assert files_a == files_b and len([p for p in files_a if p.parts[0] != "media"]) == 9  # with the .sureon-output
    assert len(files_a) > 8 + 50  # the training configs' frames under media/
    for rel in files_a:
        assert (first.out / rel).read_bytes() == (second.out / rel).read_bytes(), rel


def test_missing_video_error_lists_every_missing_source(tmp_path, videos_copy):
    from conftest import SAMPLE_RELEASE

    (videos_copy / "Tt4Kk9Jj2Hh.mp4").unlink()
    with pytest.raises(InputError) as err:
        build(tmp_path, SAMPLE_RELEASE, videos_copy, configs=["bench"])
    assert str(err.value).startswith("2 source video(s) not found")
    assert "MissingVid1" in str(err.value) and "Tt4Kk9Jj2Hh" in str(err.value)
    assert "cannot be sampled" not in str(err.value)  # every other video holds its clips
    assert not (tmp_path / "out").exists()  # nothing half-written


def test_a_missing_an_unreadable_and_a_short_video_are_named_in_one_error(tmp_path, videos_copy):
    """Every video problem of a build is listed at once, so one run shows every video to fetch or fix (a missing
    video once stopped the build before the others were looked at)."""
    from conftest import SAMPLE_RELEASE

    (videos_copy / "Tt4Kk9Jj2Hh.mp4").write_bytes(b"\x00garbage" * 64)  # MissingVid1 is missing from the sample
    write_video(videos_copy / "Zx9Qw_8eRt1.mp4", seconds=20, fps=30)
    with pytest.raises(InputError) as err:
        build(tmp_path, SAMPLE_RELEASE, videos_copy, configs=["bench", "train_all"], blur=None)
    message = str(err.value)
    assert message.startswith("1 source video(s) not found") and "MissingVid1" in message
    assert "unreadable video Tt4Kk9Jj2Hh.mp4" in message
    assert "Zx9Qw_8eRt1.mp4: window [15.50s, 22.00s] runs past the end of this copy of the video (20.00s)" in message
    assert "(nothing was decoded)" in message and "Fetch the missing videos (`sureon videos fetch`) and fix" in message
    assert not (tmp_path / "out").exists()


def test_annotation_only_keeps_questions_without_frames(tmp_path, sample_videos):
    from conftest import SAMPLE_RELEASE

    report = build(tmp_path, SAMPLE_RELEASE, sample_videos, configs=["bench"], on_missing_video="annotation-only")
    bench = load_config(report.out, "bench")
    assert len(bench) == 12 and report.configs[0].skipped == []
    by_id = {r["question_id"]: r for r in bench}
    assert by_id["sureon_test_0041"]["frames"] == [] and by_id["sureon_test_0041"]["frame_timestamps"] == []
    assert all(len(r["frames"]) >= 4 for q, r in by_id.items() if q != "sureon_test_0041")


def test_unreadable_video_is_skipped_with_its_reason(tmp_path, videos_copy):
    from conftest import SAMPLE_RELEASE

    (videos_copy / "Tt4Kk9Jj2Hh.mp4").write_bytes(b"\x00garbage" * 64)
    shutil.copy(videos_copy / "Vq2-Lm7Np0s.mp4", videos_copy / "MissingVid1.mp4")  # only the corrupt one fails
    with pytest.raises(InputError, match="unreadable video Tt4Kk9Jj2Hh.mp4") as err:
        build(tmp_path, SAMPLE_RELEASE, videos_copy, configs=["bench"], on_missing_video="error", name="err")
    assert str(err.value).startswith("6 clip(s) cannot be sampled")  # 7 questions, two share a clip
    assert "(nothing was decoded)" in str(err.value)  # found from the header, before any decoding
    report = build(tmp_path, SAMPLE_RELEASE, videos_copy, configs=["bench"], on_missing_video="skip")
    skipped = report.configs[0].skipped
    assert len(skipped) == 7 and all(s["reason"].startswith("unreadable video") for s in skipped)
    assert {s["source_id"] for s in skipped} == {"Tt4Kk9Jj2Hh"}
    assert report.configs[0].written == 5


def test_clips_past_the_end_of_a_shorter_copy_follow_on_missing_video(tmp_path, videos_copy):
    """A 20 s copy of a 90 s source: its clips that end past 20 s are never built from the frames that are there."""
    from conftest import SAMPLE_RELEASE

    write_video(videos_copy / "Zx9Qw_8eRt1.mp4", seconds=20, fps=30)  # train: 4-11 s fits, 15.5-22 s onwards not
    with pytest.raises(InputError, match=r"runs past the end of this copy of the video \(20.00s\)") as err:
        build(tmp_path, SAMPLE_RELEASE, videos_copy, configs=["train_all"], on_missing_video="error", name="err")
    assert "(nothing was decoded)" in str(err.value) and not (tmp_path / "err").exists()
    assert not list((tmp_path / "err-cache").rglob("*.frames"))  # refused from the header, before any decoding

    report = build(tmp_path, SAMPLE_RELEASE, videos_copy, configs=["train_all"], on_missing_video="skip")
    skipped = {s["question_id"]: s for s in report.configs[0].skipped}
    assert {s["source_id"] for s in skipped.values()} == {"Zx9Qw_8eRt1"} and len(skipped) == 4
    assert all("runs past the end of this copy" in s["reason"] for s in skipped.values())
    manifest = json.loads((report.out / "build_manifest.json").read_text())
    assert manifest["configs"]["train_all"]["read"] == 20 == report.configs[0].written + len(skipped)
    assert {r["question_id"] for r in manifest["configs"]["train_all"]["skipped"]} == set(skipped)
    kept = load_config(report.out, "train_all").filter(lambda r: r["source_id"] == "Zx9Qw_8eRt1")
    assert len(kept) == 1 and max(kept[0]["frame_timestamps"]) <= kept[0]["end"]

    kept_bare = build(
        tmp_path, SAMPLE_RELEASE, videos_copy, configs=["train_all"], on_missing_video="annotation-only", name="bare"
    )
    rows = load_config(kept_bare.out, "train_all").filter(lambda r: r["question_id"] in skipped)
    assert len(rows) == 4 and all(r["frames"] == [] for r in rows)


def test_annotation_only_build_without_videos(tmp_path):
    from conftest import SAMPLE_RELEASE

    report = build(tmp_path, SAMPLE_RELEASE)
    bench = load_config(report.out, "bench")
    assert "frames" not in bench.column_names and len(bench) == 12


def test_leakage_fails_the_build(tmp_path, rows, write_rows):
    rows["validation"].append(dict(rows["test"][0], question_id="leaked"))
    with pytest.raises(ReleaseError, match="Tt4Kk9Jj2Hh in validation, test"):
        build(tmp_path, write_rows(rows))


def test_extra_columns_reach_the_output(tmp_path, rows, write_rows):
    for split_rows in rows.values():
        for i, row in enumerate(split_rows):
            row["video_title"] = f"Lecture {i}"
    report = build(tmp_path, write_rows(rows, schema=None), configs=["bench"])
    bench = load_config(report.out, "bench")
    assert bench["video_title"][:2] == ["Lecture 0", "Lecture 1"]
    assert "`video_title` | carried through" in (report.out / "README.md").read_text()


def test_large_configs_are_sharded(tmp_path, sample_videos):
    from conftest import SAMPLE_RELEASE

    report = build(
        tmp_path,
        SAMPLE_RELEASE,
        sample_videos,
        configs=["train_all"],
        max_shard_bytes=20_000,
        frames_layout="embedded",
    )
    shards = sorted((report.out / "train_all").glob("*.parquet"))
    assert len(shards) > 2 and shards[0].name == f"train-00000-of-{len(shards):05d}.parquet"
    ds = load_config(report.out, "train_all")
    assert ds["question_id"] == [r["question_id"] for r in read_release(SAMPLE_RELEASE).splits["train"].records]


def test_output_is_replaced_only_with_overwrite(tmp_path):
    from conftest import SAMPLE_RELEASE

    build(tmp_path, SAMPLE_RELEASE, configs=["bench"])
    with pytest.raises(FileExistsError, match="--overwrite"):
        build(tmp_path, SAMPLE_RELEASE, configs=["bench"])
    report = build(tmp_path, SAMPLE_RELEASE, configs=["db"], overwrite=True)
    assert get_dataset_config_names(str(report.out)) == ["db"]
    assert not [p for p in tmp_path.iterdir() if ".partial-" in p.name or ".old-" in p.name]


def test_cli_build_prints_counts_and_how_to_load(tmp_path, sample_videos, capsys):
    from conftest import SAMPLE_RELEASE

    out = tmp_path / "cli"
    argv = [
        "build",
        "sureon",
        "--release",
        str(SAMPLE_RELEASE),
        "--videos",
        str(sample_videos),
        "--out",
        str(out),
        "--configs",
        "bench",
        "validation",
        "--on-missing-video",
        "skip",
        "--max-side",
        "96",
        "--cache-dir",
        str(tmp_path / "cache"),
    ]
    assert cli_main(argv) == 0
    printed = capsys.readouterr().out
    assert re.search(r"bench\s+test\s+read\s+12\s+written\s+11\s+skipped\s+1", printed)
    assert f'load_dataset("{out}", "bench")' in printed
    frame = load_config(out, "bench")[0]["frames"][0]
    assert max(frame.size) == 96
    assert cli_main(argv) == 2  # exists, no --overwrite
    assert "--overwrite" in capsys.readouterr().err


def test_cli_column_mapping(tmp_path, rows, write_rows, capsys):
    for split_rows in rows.values():
        for row in split_rows:
            row["prompt"] = row.pop("question")
    release = write_rows(rows, schema=None)
    argv = ["build", "sureon", "--release", str(release), "--out", str(tmp_path / "o"), "--configs", "bench"]
    assert cli_main(argv) == 2
    assert "missing required column(s): question" in capsys.readouterr().err
    assert cli_main([*argv, "--column", "question=prompt"]) == 0


def test_frames_are_jpeg(built):
    record = load_config(built.out, "validation")[0]
    assert record["frames"][0].format == "JPEG"
    raw = load_config(built.out, "validation").cast_column("frames", record_frames_raw())[0]["frames"][0]
    assert Image.open(io.BytesIO(raw["bytes"])).format == "JPEG" and raw["path"] is None


def record_frames_raw():
    from datasets import Image as ImageFeature
    from datasets import List

    return List(ImageFeature(decode=False))


def test_rebuilt_folder_of_the_same_name_never_loads_stale_cached_data(tmp_path, built):
    """``datasets`` keys a local folder's cache by its name and card: the card's dataset_info keeps them apart."""
    from conftest import SAMPLE_RELEASE

    other = build(tmp_path, SAMPLE_RELEASE, configs=["bench"], name=built.out.name)
    shared_cache = tmp_path / "shared_cache"
    with_frames = load_dataset(str(built.out), "bench", split="test", cache_dir=str(shared_cache))
    without = load_dataset(str(other.out), "bench", split="test", cache_dir=str(shared_cache))
    assert (len(with_frames), "frames" in with_frames.column_names) == (11, True)
    assert (len(without), "frames" in without.column_names) == (12, False)


def test_files_layout_stores_each_frame_once_and_the_training_mixture_resolves_it(
    built, tmp_path, sample_videos, fps_of
):
    from conftest import SAMPLE_RELEASE

    from builders.hub import resolve_frames
    from recipes.training.mixture import MixtureSource, load_source

    embedded = build(
        tmp_path, SAMPLE_RELEASE, sample_videos, name="embedded", on_missing_video="skip", frames_layout="embedded"
    )
    assert json.loads((embedded.out / "build_manifest.json").read_text())["frames"]["layout"]["db"] == "embedded"
    media = sorted((built.out / "media").rglob("*.jpg"))
    referenced = set()
    for config in ("db", "train_all"):
        as_files, as_bytes = load_config(built.out, config), load_config(embedded.out, config)
        raw = as_bytes.cast_column("frames", record_frames_raw())
        assert as_files["question_id"] == as_bytes["question_id"]
        for paths, frames, stamps, other_stamps in zip(
            as_files["frames"], raw["frames"], as_files["frame_timestamps"], as_bytes["frame_timestamps"], strict=True
        ):
            assert all(re.fullmatch(r"media/[\w-]+/\d{7}\.jpg", path) for path in paths)
            assert [(built.out / path).read_bytes() for path in paths] == [frame["bytes"] for frame in frames]
            assert stamps == other_stamps
            referenced.update(paths)
    assert sorted(built.out / path for path in referenced) == media  # every file used, none written twice
    train_all = load_config(built.out, "train_all")
    assert sum(len(set(frames)) for frames in train_all["frames"]) > len(media)  # shared clips share files

    # on disk: rows embedding their clip's frames carry a copy per question, and load_dataset's Arrow cache (not
    # compressed) holds every copy again; the files layout stores each frame once and its Arrow cache holds text only
    copies = sum(len(frames) for config in ("db", "train_all") for frames in load_config(built.out, config)["frames"])
    assert copies > 1.5 * len(media)
    media_bytes = sum(p.stat().st_size for p in media)

    def arrow_cache_bytes(folder, config):
        ds = load_dataset(str(folder), config, split="train", cache_dir=str(tmp_path / "hf" / folder.name))
        return sum(Path(f["filename"]).stat().st_size for f in ds.cache_files)

    for config in ("db", "train_all"):
        grown = arrow_cache_bytes(embedded.out, config) - arrow_cache_bytes(built.out, config)
        row_jpegs = sum((built.out / p).stat().st_size for f in load_config(built.out, config)["frames"] for p in f)
        assert grown > 0.9 * row_jpegs  # every copy, less the paths the files layout stores instead
    assert (
        sum(
            (built.out / p).stat().st_size
            for config in ("db", "train_all")
            for f in load_config(built.out, config)["frames"]
            for p in f
        )
        > 1.5 * media_bytes
    )

    # the training mixture turns the paths into files it opens (local folder; a Hub copy fetches media/)
    loaded = load_source(MixtureSource(path=str(built.out), name="db", split="train"))
    assert loaded.media_root == built.out
    row = resolve_frames(loaded.dataset[0], loaded.media_root)
    assert [read_frame_index(Image.open(path)) for path in row["frames"]] == [
        round(t * fps_of[row["source_id"]]) for t in row["frame_timestamps"]
    ]


def test_the_cards_one_liner_gives_a_load_dataset_user_the_frames(built, monkeypatch):
    """The dataset card shows how to resolve `db`'s relative frame paths with `datasets` and `huggingface_hub` alone;
    run as written, against this build standing in for its Hub copy, it yields the build's own JPEGs."""
    import huggingface_hub
    from datasets import Image as ImageFeature
    from datasets import List

    card = (built.out / "README.md").read_text()
    snippet = next(
        block for block in re.findall(r"```python\n(.*?)```", card, re.DOTALL) if "snapshot_download" in block
    )
    requested = []

    def snapshot(repo_id, **kwargs):  # what the Hub would return: a local copy holding media/
        requested.append((repo_id, kwargs))
        return str(built.out)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot)
    namespace = {"load_dataset": load_dataset}
    exec(snippet.replace('"ORG/sureon"', repr(str(built.out))), namespace)  # noqa: S102 (the card's own code)
    assert requested == [(str(built.out), {"repo_type": "dataset", "allow_patterns": "media/**"})]
    db, stored = namespace["db"], load_config(built.out, "db")
    assert len(db) == len(stored) > 0
    for row, paths in zip(db, stored["frames"], strict=True):
        assert [Path(frame).read_bytes() for frame in row["frames"]] == [(built.out / p).read_bytes() for p in paths]
    decoded = db.cast_column("frames", List(ImageFeature()))[0]["frames"]
    assert decoded[0].size == Image.open(built.out / stored[0]["frames"][0]).size


def test_a_hub_builds_media_is_fetched_once_only_when_its_frames_are_files(built, monkeypatch, tmp_path):
    import huggingface_hub

    from builders.hub import media_root, resolve_frames

    calls = []

    def snapshot(repo_id, **kwargs):
        calls.append((repo_id, kwargs))
        return str(built.out)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot)
    assert media_root("my-org/sureon", load_config(built.out, "bench")) is None  # embedded: nothing fetched
    assert calls == []
    db = load_config(built.out, "db")
    root = media_root("my-org/sureon", db, revision="v1")
    assert calls == [("my-org/sureon", {"repo_type": "dataset", "revision": "v1", "allow_patterns": ["media/**"]})]
    row = resolve_frames(db[0], root)
    assert all(Path(frame).is_absolute() and Path(frame).is_file() for frame in row["frames"])
    with pytest.raises(ValueError, match="frames not found"):
        resolve_frames(db[0], tmp_path)  # a media/ folder that lacks them is an error naming them
