"""Generic checks over every public source (torchvision style): a tiny copy in the native layout per source, read
into the common schema, the bad-input cases each source's sample module defines (each an error naming the file), and
its warned inputs (each builds, with a warning naming the file)."""

import shutil

import pyarrow.parquet as pq
import pytest

from public_converters.media import SHORT_ANNOTATION, check_media
from public_converters.normalise import normalise_source, observed_capabilities
from public_converters.samples._common import BAD_INPUT_CASES, WARNED_INPUT_CASES
from public_converters.schema import write_tables
from public_converters.spec import registry, sample_module


SOURCES = sorted(registry())


@pytest.fixture(scope="module")
def sample_roots(tmp_path_factory):
    """name -> folder holding that source's native-layout sample, written once per module."""
    roots = {}
    for name in SOURCES:
        root = tmp_path_factory.mktemp(name)
        sample_module(name).write(root)
        roots[name] = root
    return roots


def test_every_source_has_a_sample_and_bad_inputs():
    for name in SOURCES:
        module = sample_module(name)
        assert callable(module.write), name
        cases = set(module.BAD_INPUTS)
        assert cases <= set(BAD_INPUT_CASES), name
        assert {"missing_file", "malformed_row", "unknown_label"} <= cases, f"{name} lacks core bad-input cases"
        assert set(getattr(module, "WARNED_INPUTS", {})) <= set(WARNED_INPUT_CASES), name
        assert not cases & set(getattr(module, "WARNED_INPUTS", {})), f"{name}: a case is both an error and a warning"


@pytest.mark.parametrize("name", SOURCES)
def test_sample_reads_into_the_schema(name, sample_roots, tmp_path):
    spec = registry()[name]
    normalised = normalise_source(spec, sample_roots[name])
    assert check_media(normalised).warnings == {}, name  # the intact sample warns about nothing
    tables = normalised.tables
    module = sample_module(name)
    if tables.coverage:  # its annotation files label whole videos: a file cut short must be an error or a warning
        assert "short_annotation" in {*module.BAD_INPUTS, *getattr(module, "WARNED_INPUTS", {})}, name
        assert set(tables.coverage) <= {v.video_id for v in tables.videos if v.video_path}, name
        assert "missing_video" in module.BAD_INPUTS, f"{name}: an annotated video that is missing must be refused"
    if any(video.video_path for video in tables.videos):  # it decodes videos: one under another name is refused
        assert "misnamed_video" in module.BAD_INPUTS, name
    assert tables.videos and (tables.frames or tables.segments)
    # the sample exercises every capability the source declares, and nothing else
    assert observed_capabilities(tables) == set(spec.capabilities)
    canonical = {kind: set(table.values()) for kind, table in spec.labels.items()}
    for frame in tables.frames:
        assert frame.phase is None or frame.phase in canonical["phase"]
        assert frame.step is None or frame.step in canonical["step"]
        for tool in frame.tools or []:
            assert tool in canonical["tool"], (name, tool)
        for structure in frame.anatomy or []:
            assert structure in canonical["anatomy"], (name, structure)
    for instance in tables.instances:
        assert instance.label in canonical[instance.kind], (name, instance)
    if "image" in spec.branches:  # frame images, or frames to decode from the video
        with_video = {v.video_id for v in tables.videos if v.video_path and spec.video_frames_as_images}
        assert any(f.image_path or f.video_id in with_video for f in tables.frames), f"{name}: no image-branch frames"
    if "clip" in spec.branches:
        assert all(video.fps for video in tables.videos), f"{name}: clip branch needs each video's fps"
        assert tables.segments, f"{name}: clip branch without temporal segments"
    splits = {video.split for video in tables.videos}
    assert splits <= {"train", "validation", "test", "unused"}, splits
    # two reads are byte-identical
    write_tables(tables, normalised.info(), tmp_path / "a")
    write_tables(normalise_source(spec, sample_roots[name]).tables, normalised.info(), tmp_path / "b")
    for table in ("videos", "frames", "instances", "segments", "relations"):
        assert pq.read_table(tmp_path / "a" / f"{table}.parquet").equals(
            pq.read_table(tmp_path / "b" / f"{table}.parquet")
        )


@pytest.mark.parametrize(
    ("name", "case"),
    [(name, case) for name in SOURCES for case in sorted(sample_module(name).BAD_INPUTS)],
)
def test_bad_input_names_the_file(name, case, sample_roots, tmp_path):
    """Each bad input stops the read or the media check with an error naming the file; an annotated video that is
    missing or under another name is one (``missing_video``, ``misnamed_video``: the file expected, and the near miss
    found), never a video silently left out of the corpus and its benchmarks."""
    root = tmp_path / name
    shutil.copytree(sample_roots[name], root)
    culprit = sample_module(name).BAD_INPUTS[case](root)
    with pytest.raises(ValueError) as error:
        normalised = normalise_source(registry()[name], root)
        check_media(normalised)
    assert culprit in str(error.value), f"{name}/{case}: the error does not name {culprit}: {error.value}"


@pytest.mark.parametrize(
    ("name", "case"),
    [(name, case) for name in SOURCES for case in sorted(getattr(sample_module(name), "WARNED_INPUTS", {}))],
)
def test_warned_input_builds_and_names_the_file(name, case, sample_roots, tmp_path):
    """An annotation file cut at a line boundary: what it still labels is read, and the media check (from the
    video's frame count it reads anyway) warns once, naming the file, the video and the unlabelled frames."""
    root = tmp_path / name
    shutil.copytree(sample_roots[name], root)
    culprit = sample_module(name).WARNED_INPUTS[case](root)
    intact = check_media(normalise_source(registry()[name], sample_roots[name])).tables
    normalised = check_media(normalise_source(registry()[name], root))
    (warning,) = normalised.warnings[SHORT_ANNOTATION]
    assert culprit in warning["file"] and "have no label and are left out" in warning["message"], warning
    assert normalised.info()["warnings"][SHORT_ANNOTATION]["count"] == 1
    video = warning["video"]
    coverage = normalised.tables.coverage[video]
    assert coverage.frames < intact.coverage[video].frames
    # the labels that are there are kept: none runs past the file's end, every other video is as before
    assert all(s.end_frame < coverage.frames for s in normalised.tables.segments if s.video_id == video)
    assert [s for s in normalised.tables.segments if s.video_id != video] == [
        s for s in intact.segments if s.video_id != video
    ]
