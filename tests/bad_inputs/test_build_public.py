"""Bad input to ``sureon build public``: each mistake a new user makes is one clear line naming the file (and row)
and the fix, with nothing written (cases of the bad-input table, ``tests/bad_inputs/``), and the two cases the build
keeps going through (an annotation file that ends before its video, a source that yields no record) are named,
counted warnings in the manifest and the printed summary, after which every printed ``load_dataset`` line loads.

Sources are the tiny native-layout samples of ``public_converters/samples`` (written once per session, copied per
case), damaged the way a download or an editor damages them.
"""

import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from public_converters.samples._common import cut_lines, not_utf8, rewrite
from public_converters.spec import sample_module
from sureon import cli

from . import BadInput, Inputs, run_cases


SAMPLING = ["--min-clip-seconds", "4", "--max-clip-seconds", "12", "--grid-fps", "2"]


def _sample(inputs: Inputs, name: str) -> Path:
    """The source's sample copy, written once per session (a case copies it before damaging it)."""
    cached = inputs.fixture("tmp_path_factory").getbasetemp() / "public_samples" / name
    if not cached.is_dir():
        partial = cached.with_name(f".{name}.partial")
        shutil.rmtree(partial, ignore_errors=True)
        sample_module(name).write(partial)
        partial.rename(cached)
    return cached


def _root(inputs: Inputs, *names: str, folders: dict[str, str] | None = None, damage=None) -> Path:
    """A --source-root holding the samples of ``names``, each in the folder ``folders`` names (default: its own
    name); ``damage(root)`` is applied to the whole root afterwards."""
    root = inputs.tmp / "sources"
    root.mkdir(exist_ok=True)
    for name in names:
        shutil.copytree(_sample(inputs, name), root / (folders or {}).get(name, name))
    if damage is not None:
        damage(root)
    return root


def _build(*extra: str, sources=("cholec80",), folders=None, damage=None) -> Callable[[Inputs], list[str]]:
    """`sureon build public --source-root ROOT --out OUT` on the case's samples, plus ``extra`` options."""

    def argv(inputs: Inputs) -> list[str]:
        root = _root(inputs, *sources, folders=folders, damage=damage)
        cache = ["--cache-dir", str(inputs.tmp / "cache")]
        return ["build", "public", "--source-root", str(root), "--out", str(inputs.out), *cache, *SAMPLING, *extra]

    return argv


def _options(*options: str) -> Callable[[Inputs], list[str]]:
    """Options refused by argparse or before any source is read (the source root may then be empty)."""

    def argv(inputs: Inputs) -> list[str]:
        root = inputs.tmp / "sources"
        (root / "cholec80").mkdir(parents=True)
        return ["build", "public", "--source-root", str(root), "--out", str(inputs.out), *options]

    return argv


def _in(source: str, damage):
    """A sample module's damage, applied to that source's folder of the root."""
    return lambda root: damage(root / source)


def _garbage_video(root: Path) -> None:
    (root / "cholec80" / "videos" / "video41.mp4").write_bytes(bytes(range(256)) * 40)


def _unlink(relative: str):
    return lambda root: (root / relative).unlink()


def _rename(relative: str, name: str):
    return lambda root: (root / relative).rename((root / relative).with_name(name))


def _missing_and_unreadable(root: Path) -> None:
    """video41 missing and video01 not a video: both belong in one message (a fix, a rerun, the next fix)."""
    (root / "cholec80" / "videos" / "video41.mp4").unlink()
    (root / "cholec80" / "videos" / "video01.mp4").write_bytes(bytes(range(256)) * 40)


def _sixteen_bit_mask(root: Path) -> None:
    """An 8-bit grey mask re-saved as a 16-bit PNG, its levels stretched (x257), as an image editor saves it."""
    import numpy as np
    from PIL import Image

    path = root / "autolaparo" / "AutoLaparo_Task3" / "masks" / "001001.png"
    with Image.open(path) as image:
        grey = np.asarray(image)[..., 0].astype(np.uint16) * 257
    Image.fromarray(grey).save(path)


def _pig8_only(root: Path) -> None:
    """HemoSet reduced to pig 8, which the third-party split variant leaves out of every split."""
    for pig in ("pig2", "pig10"):
        shutil.rmtree(root / "hemoset" / pig)
    (root / "hemoset" / "pig1").rename(root / "hemoset" / "pig8")


def _tmrnet_phase_id_7(root: Path) -> None:
    """video41's phase file as TMRNet ships it (no header, ``frame<TAB>phase id`` every 25 frames), one id out of
    range."""
    rows = [f"{frame}\t{7 if frame == 275 else 1}" for frame in range(0, 1000, 25)]
    (root / "cholec80" / "phase_annotations" / "video41-phase.txt").write_text("\n".join(rows) + "\n")


def _mkdir(*relative: str):
    def make(inputs: Inputs) -> Path:
        (inputs.tmp / "sources").mkdir()
        for name in relative:
            (inputs.tmp / "sources" / name).mkdir()
        return inputs.tmp / "sources"

    return make


def _root_only(make: Callable[[Inputs], Path]) -> Callable[[Inputs], list[str]]:
    return lambda i: ["build", "public", "--source-root", str(make(i)), "--out", str(i.out)]


def _a_file(inputs: Inputs) -> Path:
    path = inputs.tmp / "sources.txt"
    path.write_text("cholec80\n")
    return path


PHASE_01 = "phase_annotations/video01-phase.txt"

CASES: list[BadInput] = [
    # ---- the source root ------------------------------------------------------------------------------------------
    BadInput(
        "build public",
        "--source-root does not exist",
        _root_only(lambda i: i.tmp / "no-such-folder"),
        "no-such-folder does not exist: give the folder holding one sub-folder per source",
    ),
    BadInput("build public", "--source-root is a file", _root_only(_a_file), "sources.txt is a file, not a folder"),
    BadInput("build public", "empty --source-root", _root_only(_mkdir()), "it has no sub-folder"),
    BadInput(
        "build public",
        "--source-root whose folders are named after no source",
        _root_only(_mkdir("notes", "downloads")),
        "none of its sub-folders (downloads, notes) is named after a source",
    ),
    *(
        BadInput(
            "build public",
            f"source folder named {folder!r} (a near miss), alone",
            _build(folders={"cholec80": folder}),
            f"folder '{folder}' looks like the source 'cholec80' but is not named 'cholec80', so cholec80 would be "
            "left out of the build: rename the folder to 'cholec80'",
        )
        for folder in ("Cholec80", "cholec_80", "Cholec-80", "Cholec8O")
    ),
    BadInput(
        "build public",
        "source folder 'Cholec80' beside 'cholec80'",
        _build(damage=lambda root: shutil.copytree(root / "cholec80", root / "Cholec80")),
        "folder 'Cholec80' looks like the source 'cholec80', whose folder 'cholec80' is there too",
    ),
    BadInput(
        "build public",
        "--source with a near-miss name",
        lambda i: ["build", "public", "--source", f"Cholec80={_root(i, 'cholec80')}", "--out", str(i.out)],
        "unknown public source 'Cholec80'; did you mean 'cholec80'?",
    ),
    BadInput(
        "build public",
        "--source folder does not exist",
        lambda i: ["build", "public", "--source", f"cholec80={i.tmp / 'missing'}", "--out", str(i.out)],
        "missing does not exist; give the folder of the cholec80 release",
    ),
    BadInput(
        "build public",
        "--split-variant for a source the build does not have",
        _build("--split-variant", "cholec_80=32-8-40"),
        "'cholec_80' is not a source of this build (did you mean 'cholec80'?)",
    ),
    BadInput(
        "build public",
        "--split-variant that the source does not have",
        _build("--split-variant", "cholec80=40-40"),
        "cholec80 has no split variant '40-40'; known: endonet, 32-8-40",
    ),
    # ---- numeric options ------------------------------------------------------------------------------------------
    BadInput(
        "build public",
        "--min-clip-seconds 0",
        _options("--min-clip-seconds", "0"),
        "--min-clip-seconds: 0 is not a number greater than 0",
    ),
    BadInput(
        "build public",
        "--max-clip-seconds negative",
        _options("--max-clip-seconds", "-3"),
        "--max-clip-seconds: -3 is not a number greater than 0",
    ),
    BadInput(
        "build public",
        "--min-clip-seconds above --max-clip-seconds",
        _options("--min-clip-seconds", "20", "--max-clip-seconds", "10"),
        "--min-clip-seconds 20 is more than --max-clip-seconds 10",
    ),
    BadInput("build public", "--grid-fps NaN", _options("--grid-fps", "nan"), "'nan' is not a finite number"),
    BadInput("build public", "--bench-fps 0", _options("--bench-fps", "0"), "--bench-fps: 0 is not a number greater"),
    BadInput(
        "build public",
        "--max-shard-size not a size",
        _options("--max-shard-size", "lots"),
        "'lots' is not a size such as 500MB",
    ),
    BadInput("build public", "--num-proc 0", _options("--num-proc", "0"), "0 is not an integer of at least 1"),
    BadInput(
        "build public", "--max-side negative", _options("--max-side", "-1"), "-1 is not an integer of at least 0"
    ),
    BadInput(
        "build public",
        "--max-grounded-per-video negative",
        _options("--max-grounded-per-video", "-2"),
        "--max-grounded-per-video: -2 is not an integer of at least 0",
    ),
    BadInput(
        "build public",
        "--max-concurrency 0",
        _options("--max-concurrency", "0"),
        "--max-concurrency: 0 is not an integer of at least 1",
    ),
    # ---- media and annotation files -------------------------------------------------------------------------------
    BadInput(
        "build public",
        "a video that is not a video",
        _build(damage=_garbage_video),
        "video41.mp4: cannot open the video (",
    ),
    BadInput(
        "build public",
        "an annotated Cholec80 video missing (it was left out without a word)",
        _build(damage=_unlink("cholec80/videos/video41.mp4")),
        "cholec80/videos/video41.mp4: not found, and video41 is annotated: add the video",
    ),
    BadInput(
        "build public",
        "a Cholec80 video named in another case (VIDEO41.MP4)",
        _build(damage=_rename("cholec80/videos/video41.mp4", "VIDEO41.MP4")),
        "video41.mp4: not found, but videos/VIDEO41.MP4 is there: if it is this video, rename it to video41.mp4",
    ),
    BadInput(
        "build public",
        "the Cholec80 videos in a folder named Videos",
        _build(damage=_rename("cholec80/videos", "Videos")),
        "videos/video01.mp4: not found, but Videos/video01.mp4 is there",
    ),
    BadInput(
        "build public",
        "a HeiChole video missing (its labels were skipped with a warning)",
        _build(sources=("heichole",), damage=_unlink("heichole/Videos/Full/Hei-Chole16.mp4")),
        "Hei-Chole16.mp4: not found, and Hei-Chole16 is annotated",
    ),
    BadInput(
        "build public",
        "a MultiBypass140 video the split files list but not downloaded (it was left out without a word)",
        _build(
            sources=("multibypass_bern",),
            damage=_unlink("multibypass_bern/datasets/MultiBypass140/BernBypass70/videos/BBP02.mp4"),
        ),
        "BBP02.mp4: not found, and BBP02 is annotated",
    ),
    BadInput(
        "build public",
        "a video missing and another unreadable (both in one message)",
        _build(damage=_missing_and_unreadable),
        "2 media problems:",
    ),
    BadInput(
        "build public",
        "a 16-bit segmentation mask (an 8-bit mask re-saved, its levels x257)",
        _build(sources=("autolaparo",), damage=_sixteen_bit_mask),
        "001001.png: a grey mask of uint16 values (PIL mode I;16): values 5140, 10280, 41120, 46260 are not in the "
        "source's palette (values 0, 20, 40,",
    ),
    BadInput(
        "build public",
        "a video cut short (a broken download)",
        _build(damage=_in("cholec80", sample_module("cholec80").BAD_INPUTS["truncated_image"])),
        "videos/video01.mp4:",
    ),
    BadInput(
        "build public",
        "an annotation file that is not UTF-8",
        _build(damage=_in("cholec80", not_utf8(PHASE_01))),
        "video01-phase.txt, row 2: not UTF-8 text (byte 0xe9 at offset 12) (save the file as UTF-8",
    ),
    BadInput(
        "build public",
        "an annotation line with an extra cell",
        _build(damage=_in("cholec80", sample_module("cholec80").BAD_INPUTS["malformed_row"])),
        "video01-phase.txt, row 14: malformed row '12\\tPreparation\\t7' (expected 2 tab-separated cells)",
    ),
    BadInput(
        "build public",
        "a negative frame number in an annotation",
        _build(damage=_in("cholec80", rewrite(PHASE_01, "\n12\tPreparation\n", "\n-12\tPreparation\n"))),
        "video01-phase.txt, row 14: frame '-12' is not a frame number (a frame is a whole number from 0)",
    ),
    BadInput(
        "build public",
        "a NaN tool value in an annotation",
        _build(damage=_in("cholec80", rewrite("tool_annotations/video41-tool.txt", "\n25\t1\t", "\n25\tnan\t"))),
        "video41-tool.txt, row 3: tool values must be 0 or 1",
    ),
    BadInput(
        "build public",
        "a phase id outside 0-6 in a headerless (TMRNet-style) Cholec80 phase file",
        _build(damage=_tmrnet_phase_id_7),
        "video41-phase.txt, row 12: phase id '7' is not 0-6 (the file is read as the TMRNet-style",
    ),
    BadInput(
        "build public",
        "a HeiChole skill file that is not one line of 5 integers",
        _build(
            sources=("heichole",),
            damage=_in("heichole", rewrite("Annotations/Skill/Hei-Chole1_Calot_Skill.csv", "3,4,3,4,2", "3,4,3,4")),
        ),
        "Hei-Chole1_Calot_Skill.csv, row 1: skill row '3,4,3,4' is not 5 comma-separated integers",
    ),
    BadInput(
        "build public",
        "a NaN box value in a JSON annotation",
        _build(sources=("cholect50",), damage=_in("cholect50", sample_module("cholect50").BAD_INPUTS["bad_number"])),
        "labels/VID01.json, row 1: box value is nan, expected a finite number",
    ),
    BadInput(
        "build public",
        "a negative box width in a COCO annotation",
        _build(
            sources=("endoscapes",), damage=_in("endoscapes", sample_module("endoscapes").BAD_INPUTS["bad_number"])
        ),
        "val/annotation_coco.json, row annotations[0]: bbox width is -12.5, expected at least 0",
    ),
    BadInput(
        "build public",
        "a phase file cut short that the instrument file gives away",
        _build(
            sources=("heichole",), damage=_in("heichole", sample_module("heichole").BAD_INPUTS["short_annotation"])
        ),
        "rows run to frame 74, but Hei-Chole1_Annotation_Phase.csv labels frames 0-39 only",
    ),
    # ---- nothing to write -----------------------------------------------------------------------------------------
    BadInput(
        "build public",
        "a split variant that leaves every video out (zero rows)",
        _build("--split-variant", "hemoset=third-party", sources=("hemoset",), damage=_pig8_only),
        "nothing to write: no source gave a QA record (hemoset: image video outside the split variant: 2)",
    ),
]


test_bad_input = run_cases(CASES)


# ---- what builds, with a warning -----------------------------------------------------------------------------------


def _run(argv: list[str], capsys) -> tuple[str, dict]:
    """Run the command (it must succeed); its summary and manifest."""
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    out = Path(argv[argv.index("--out") + 1])
    return captured.out, json.loads((out / "manifest.json").read_text())


def _printed_configs_load(summary: str) -> None:
    """Every ``load_dataset`` line the build printed loads, and every split it has holds rows."""
    from datasets import load_dataset

    lines = re.findall(r'datasets\.load_dataset\("([^"]+)", "([^"]+)"\)', summary)
    assert lines, summary
    for folder, config in lines:
        loaded = load_dataset(folder, config)
        assert loaded and all(len(split) > 0 for split in loaded.values()), (config, loaded)


def test_an_annotation_file_cut_short_builds_what_it_labels_with_a_named_counted_warning(tmp_path, request, capsys):
    """The issue's Cholec80 case: video01's phase file cut at a line boundary (300 of 1,010 frames)."""
    inputs = Inputs(tmp_path, request)
    argv = _build("--no-benchmarks", damage=_in("cholec80", cut_lines(PHASE_01, 1 + 300)))(inputs)
    summary, manifest = _run(argv, capsys)
    warnings = manifest["sources"]["cholec80"]["warnings"]
    assert warnings["annotation files that end before their video"]["count"] == 1
    (case,) = warnings["annotation files that end before their video"]["cases"]
    assert case["file"] == PHASE_01 and case["video"] == "video01"
    assert "cover frames 0-299 of video01's 1010; the last 710 frames have no label" in case["message"]
    printed = " ".join(summary.split())
    assert "warning: annotation files that end before their video: 1" in printed
    assert f"{inputs.tmp / 'sources' / 'cholec80' / PHASE_01}: phase labels cover frames 0-299" in printed
    _printed_configs_load(summary)


def test_a_missing_and_an_unreadable_video_are_named_in_one_run(tmp_path, request, capsys):
    """Every media problem of a source is listed at once: the unreadable video01 beside the missing video41 (the
    missing one was once dropped without a word, so a user fixed video01 and only then lost video41's 116 QAs)."""
    inputs = Inputs(tmp_path, request)
    assert cli.main(_build(damage=_missing_and_unreadable)(inputs)) == 2
    err = capsys.readouterr().err
    sources = inputs.tmp / "sources" / "cholec80"
    assert f"{sources / 'videos/video01.mp4'}: cannot open the video (" in err
    assert f"{sources / 'videos/video41.mp4'}: not found, and video41 is annotated" in err
    assert not inputs.out.exists()


def test_a_source_with_no_record_is_named_and_no_empty_config_is_written(tmp_path, request, capsys):
    inputs = Inputs(tmp_path, request)
    variant = ["--split-variant", "hemoset=third-party", "--no-benchmarks"]
    argv = _build(*variant, sources=("hemoset", "cholecseg8k"), damage=_pig8_only)(inputs)
    summary, manifest = _run(argv, capsys)
    assert manifest["sources"]["hemoset"]["branches_written"] == {}
    entry = manifest["sources"]["hemoset"]["warnings"]["no QA record written (no config for this source)"]
    assert entry == {"count": 1, "cases": [{"file": None, "message": "image video outside the split variant: 2"}]}
    assert "hemoset: nothing written" in summary and "warning: no QA record written" in summary
    assert not any("hemoset" in c["config_name"] for c in manifest["configs"])
    assert not (inputs.out / "data" / "image" / "hemoset").exists()
    _printed_configs_load(summary)
