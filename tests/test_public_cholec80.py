"""Cholec80: the release's annotation files, the EndovisML visualiser's copy of them and the headerless phase files
TMRNet ships read to the same tables."""

import dataclasses
import json
import shutil

import pytest

from public_converters.build import BuildOptions, build_public
from public_converters.clips import SamplingConfig
from public_converters.normalise import normalise_source
from public_converters.samples.cholec80 import ENDOVIS_ML_TAIL, write_endovis_ml, write_tmrnet
from public_converters.schema import SourceError
from public_converters.spec import registry, sample_module


SPEC = registry()["cholec80"]
COPY = "EndovisML copy (comma-separated, phase ids per second)"
RELEASE = "release (tab-separated, phase names per frame)"
TMRNET = "TMRNet-style (headerless, tab-separated, phase ids per second)"


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    release, copy = tmp_path_factory.mktemp("release"), tmp_path_factory.mktemp("endovis_ml")
    sample_module("cholec80").write(release)
    write_endovis_ml(copy)
    return release, copy


@pytest.fixture(scope="module")
def tmrnet(tmp_path_factory):
    root = tmp_path_factory.mktemp("tmrnet")
    write_tmrnet(root)
    return root


@pytest.fixture
def copy(roots, tmp_path):
    """A private EndovisML-shaped copy a test may damage."""
    shutil.copytree(roots[1], tmp_path / "copy")
    return tmp_path / "copy"


def _ends_aside(segments):
    """A phase row a second covers its 25 frames, so the last run ends on the row's second, not the video's frame."""
    return [dataclasses.replace(s, end_frame=0, period=1) if s.kind == "phase" else s for s in segments]


def test_the_endovis_ml_copy_reads_to_the_releases_phases_and_tools(roots):
    release = normalise_source(SPEC, roots[0]).tables
    copy = normalise_source(SPEC, roots[1]).tables
    assert copy.frames == release.frames  # the 1-fps tool frames, each with its phase (ids mapped by PHASES order)
    assert _ends_aside(copy.segments) == _ends_aside(release.segments)
    phase = [s for s in copy.segments if s.kind == "phase" and s.video_id == "video41"]
    assert [(s.label, s.start_frame, s.end_frame, s.period) for s in phase] == [
        ("calot triangle dissection", 0, 249, 25),
        ("gallbladder dissection", 250, 699, 25),
        ("gallbladder packaging", 700, 999, 25),
    ]
    assert {v.video_id: v.total_frames for v in copy.videos} == {"video01": 1025, "video41": 1000}


def test_headerless_tmrnet_phase_files_read_to_the_releases_phases(roots, tmrnet):
    """TMRNet's gt-phase files (``0\t0`` on line 1: no header, a phase id every 25 frames) beside the release's tool
    files read to the release's phases and tools, and are counted as their own variant."""
    assert (tmrnet / "phase_annotations/video41-phase.txt").read_text().startswith("0\t1\n25\t1\n")
    release = normalise_source(SPEC, roots[0])
    tmrnet_read = normalise_source(SPEC, tmrnet)
    assert tmrnet_read.tables.frames == release.tables.frames
    assert _ends_aside(tmrnet_read.tables.segments) == _ends_aside(release.tables.segments)
    phase = [s for s in tmrnet_read.tables.segments if s.kind == "phase" and s.video_id == "video41"]
    assert [(s.label, s.start_frame, s.end_frame, s.period) for s in phase] == [
        ("calot triangle dissection", 0, 249, 25),
        ("gallbladder dissection", 250, 699, 25),
        ("gallbladder packaging", 700, 999, 25),
    ]
    assert tmrnet_read.tables.read_counts[f"videos in the {TMRNET} variant"] == 2


def test_the_variant_is_chosen_per_video(roots, tmrnet, tmp_path):
    """Release files for video01 and TMRNet's for the test video video41 (TMRNet ships 41-80 only)."""
    mixed = tmp_path / "mixed"
    shutil.copytree(roots[0], mixed)
    shutil.copy(tmrnet / "phase_annotations/video41-phase.txt", mixed / "phase_annotations/video41-phase.txt")
    counts = normalise_source(SPEC, mixed).tables.read_counts
    assert (counts[f"videos in the {RELEASE} variant"], counts[f"videos in the {TMRNET} variant"]) == (1, 1)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("\n275\t3\n", "\n275,3\n", r"row 12: malformed row '275,3' \(expected 2 tab-separated cells\)"),
        ("\n275\t3\n", "\n275\tGallbladderDissection\n", r"row 12: phase id 'GallbladderDissection' is not 0-6"),
        ("\n275\t3\n", "\n275\t3.0\n", r"row 12: phase id '3.0' is not 0-6 \(the file is read as the TMRNet"),
        ("\n275\t3\n", "\n275\t7\n", "row 12: phase id '7' is not 0-6"),
        ("\n275\t3\n", "\n280\t3\n", "row 12: frame 280, expected 275: frame indices are not 0, 25, 50, ..."),
        ("\n275\t3\n", "\n", "row 12: frame 300, expected 275"),
        # a header added: read as the release's (a phase name per frame), the ids a second apart are off its grid
        ("0\t1\n", "Frame\tPhase\n0\t1\n", r"row 3: frame 25, expected 1: .* grid of the release \(tab-sep"),
    ],
)
def test_a_tmrnet_phase_file_of_mixed_or_bad_shape_is_refused_in_one_line(tmrnet, tmp_path, old, new, message):
    root = tmp_path / "tmrnet"
    shutil.copytree(tmrnet, root)
    path = root / "phase_annotations/video41-phase.txt"
    text = path.read_text()
    path.write_text(text.replace(old, new, 1))
    with pytest.raises(SourceError, match=message) as error:
        normalise_source(SPEC, root)
    assert len(str(error.value).splitlines()) == 1
    assert str(error.value).startswith(str(path))


def test_a_missing_tool_file_beside_tmrnet_phase_files_names_it(tmrnet, tmp_path):
    """TMRNet ships phase files only: the release's tool files must be there, as in every variant."""
    root = tmp_path / "tmrnet"
    shutil.copytree(tmrnet, root)
    (root / "tool_annotations/video41-tool.txt").unlink()
    with pytest.raises(SourceError, match=r"video41-tool.txt: file not found \(every video needs its phase and tool"):
        normalise_source(SPEC, root)


def test_tool_rows_past_the_last_phase_frame_are_clipped_and_counted(roots):
    copy = normalise_source(SPEC, roots[1])
    assert copy.tables.read_counts == {
        "tool rows past the last phase frame (clipped)": sum(ENDOVIS_ML_TAIL.values()),
        "tool rows repeated with the same values (dropped)": 2,
        f"videos in the {COPY} variant": 2,
        "videos with tool rows past the last phase frame": 2,
    }
    release = normalise_source(SPEC, roots[0])  # video41's tool file has one sample past its 1,000 frames
    assert release.info()["read_counts"] == {
        "tool rows past the last phase frame (clipped)": 1,
        f"videos in the {RELEASE} variant": 2,
        "videos with tool rows past the last phase frame": 1,
    }


def test_the_build_manifest_counts_the_clipped_rows(roots, tmp_path):
    out = tmp_path / "public"
    options = BuildOptions(
        sources={"cholec80": roots[1]}, out=out, sampling=SamplingConfig(min_seconds=4, max_seconds=12, grid_fps=2)
    )
    build_public(options)
    manifest = json.loads((out / "manifest.json").read_text())
    counts = manifest["sources"]["cholec80"]["read_counts"]
    assert counts["tool rows past the last phase frame (clipped)"] == 5
    assert counts[f"videos in the {COPY} variant"] == 2
    assert manifest["sources"]["cholec80"]["benchmarks"]["bench-cholec80-phase-frame"]["rows"] == 40


def _replace(old: str, new: str, occurrence: int = 1):
    """Replace the ``occurrence``-th ``old`` (the second one: the repeated tool row)."""

    def damage(text: str) -> str:
        at = -1
        for _ in range(occurrence):
            at = text.index(old, at + 1)
        return text[:at] + new + text[at + len(old) :]

    return damage


@pytest.mark.parametrize(
    ("path", "damage", "message"),
    [
        ("phase_annotations/video41-phase.txt", _replace("Frame,Phase", "Frame;Phase"), "header is 'Frame;Phase'"),
        ("phase_annotations/video41-phase.txt", _replace("\n275,3\n", "\n275,7\n"), "row 13: phase id '7' is not 0-6"),
        ("phase_annotations/video41-phase.txt", _replace("\n275,3\n", "\n"), r"not 0, 25, 50, \.\.\. without gaps"),
        ("tool_annotations/video41-tool.txt", _replace("Frame,", "Frame\t"), r"header is 'Frame\\tGrasper"),
        ("tool_annotations/video41-tool.txt", _replace("\n300,1,0,1", "\n300,0,0,1", 2), "frame 300 is listed twice"),
    ],
)
def test_a_damaged_copy_names_the_file_and_row(copy, path, damage, message):
    target = copy / path
    target.write_text(damage(target.read_text()))
    with pytest.raises(SourceError, match=message) as error:
        normalise_source(SPEC, copy)
    assert path in str(error.value)


@pytest.mark.parametrize(("variant", "rows"), [("release", 300), ("endovis_ml", 12)])
def test_a_phase_file_cut_at_a_line_boundary_is_a_named_counted_warning(roots, tmp_path, variant, rows):
    """300 of video01's 1,010 frames labelled (one row a frame in the release, one a second in the copy): the labelled
    part is read as before, the rest of the video is left out, and the media check names the file and the count."""
    from public_converters.media import SHORT_ANNOTATION, check_media
    from public_converters.samples._common import cut_lines

    root = tmp_path / variant
    shutil.copytree(roots[0] if variant == "release" else roots[1], root)
    cut_lines("phase_annotations/video01-phase.txt", 1 + rows)(root)
    normalised = check_media(normalise_source(SPEC, root))
    assert normalised.info()["warnings"][SHORT_ANNOTATION]["count"] == 1
    (warning,) = normalised.warnings[SHORT_ANNOTATION]
    assert warning["file"] == "phase_annotations/video01-phase.txt" and warning["video"] == "video01"
    assert "cover frames 0-299 of video01's 1010; the last 710 frames have no label" in warning["message"]
    video01 = next(v for v in normalised.tables.videos if v.video_id == "video01")
    assert video01.total_frames == 300
    assert max(s.end_frame for s in normalised.tables.segments if s.video_id == "video01") == 299
    # the tool rows past the cut have no phase to join: clipped and counted, as before
    assert normalised.tables.read_counts["tool rows past the last phase frame (clipped)"] >= 28
