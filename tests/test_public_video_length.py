"""Labels sampled below a video's rate (1-fps tools and phases, per-second pickles, 10-Hz actions, a motion label for
the rest of a clip) on videos whose length is not a whole number of label periods: the last sample's segment is
clipped at the video's last frame and the corpus builds; a truncated video is still refused."""

import json
import shutil

import pyarrow.parquet as pq
import pytest

from builders.video import open_decoder
from public_converters.media import check_media
from public_converters.normalise import normalise_source
from public_converters.samples._common import write_video
from public_converters.schema import SourceError, read_tables
from public_converters.spec import registry, sample_module


SUB_RATE = ("autolaparo", "cholec80", "heichole", "multibypass_bern", "multibypass_strasbourg", "sarrarp50")


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    found = {}
    for name in SUB_RATE:
        found[name] = tmp_path_factory.mktemp(name)
        sample_module(name).write(found[name])
    return found


def _frame_counts(normalised) -> dict[str, int]:
    return {
        v.video_id: open_decoder(normalised.root / v.video_path).metadata.num_frames
        for v in normalised.tables.videos
        if v.video_path
    }


@pytest.mark.parametrize("name", SUB_RATE)
def test_the_last_sampled_label_ends_on_the_last_frame(name, roots):
    normalised = normalise_source(registry()[name], roots[name])
    counts = _frame_counts(normalised)
    sampled = [s for s in normalised.tables.segments if s.period > 1]
    # the sample is shaped like the real thing: some video is not a whole number of its labels' periods long
    assert any(counts[s.video_id] % s.period for s in sampled), name
    fitted = check_media(normalised).tables
    for video in fitted.videos:
        if video.video_id in counts:
            assert video.total_frames <= counts[video.video_id], (name, video)
    ends = {}
    for segment in fitted.segments:
        ends[segment.video_id] = max(ends.get(segment.video_id, -1), segment.end_frame)
        assert segment.end_frame < counts[segment.video_id], (name, segment)
    clipped = {s.video_id for s in sampled if s.end_frame >= counts[s.video_id] - 1}
    assert clipped and all(ends[video] == counts[video] - 1 for video in clipped), name


@pytest.mark.parametrize("name", SUB_RATE)
def test_a_video_short_of_its_last_sample_is_still_truncated(name, roots, tmp_path):
    root = tmp_path / name
    shutil.copytree(roots[name], root)
    normalised = normalise_source(registry()[name], root)
    video = max((v for v in normalised.tables.videos if v.video_path), key=lambda v: v.video_id)
    own = [s for s in normalised.tables.segments if s.video_id == video.video_id]
    frames = [f.frame_index for f in normalised.tables.frames if f.video_id == video.video_id]
    needed = max([*frames, *(max(s.start_frame, s.end_frame - s.period + 1) for s in own)])
    write_video(root / video.video_path, needed, int(video.fps))  # one frame short of the last labelled sample
    with pytest.raises(SourceError, match=f"{needed} frames, but labels run to frame {needed}; is the video trunc"):
        check_media(normalised)


def test_cholec80_with_a_1010_frame_video_builds_through_the_command_line(roots, tmp_path):
    from sureon.cli import main

    out = tmp_path / "public"
    sources = [f"--source={name}={roots[name]}" for name in SUB_RATE]
    assert main(["build", "public", *sources, "--out", str(out), "--max-grounded-per-video", "4"]) == 0
    tables, _ = read_tables(out / "normalised" / "cholec80")
    tools = [s for s in tables.segments if s.video_id == "video01" and s.kind == "tool"]
    assert max(s.end_frame for s in tools) == 1009  # the second sampled at frame 1000, clipped
    assert next(v for v in tables.videos if v.video_id == "video01").total_frames == 1010
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["sources"]) == set(SUB_RATE)
    totals = {
        (name, v.video_id): v.total_frames
        for name in SUB_RATE
        for v in read_tables(out / "normalised" / name)[0].videos
    }
    records = [
        record
        for path in sorted((out / "data" / "clip").rglob("*.parquet"))
        for record in pq.read_table(path, columns=["source", "video_id", "end_frame"]).to_pylist()
    ]
    assert {r["source"] for r in records} == set(SUB_RATE)
    assert all(r["end_frame"] < totals[r["source"], r["video_id"]] for r in records)
