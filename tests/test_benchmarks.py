"""Every script in benchmarks/ still runs: each at its ``--quick`` setting, in this process, printing its ratios.

A benchmark that stops following the code it measures (as ``benchmarks/frames.py`` did when the sampler's
``encode_jpeg`` began returning the blurred regions with the JPEG) would otherwise only be found by the next person
reproducing the README's figures. The quick settings are tiny, so the figures mean nothing here: only that each
script completes and prints a ratio. ``benchmarks/gpu_sft.py`` measures a GPU; its ``--tiny`` CPU run is
tests/test_plan.py's, so here only its command line is checked.
"""

import importlib
import re
from pathlib import Path

import pytest


REPO = Path(__file__).resolve().parents[1]
HELPERS = {"timing"}  # imported by the scripts, not a benchmark
GPU_ONLY = {"gpu_sft"}
SCRIPTS = sorted(p.stem for p in (REPO / "benchmarks").glob("*.py") if p.stem not in HELPERS | GPU_ONLY)
RATIO = re.compile(r"\d[\d,]*\.?\d*x\b")  # "2.35x", "1,204x", "x0.98" is not one


def run_quick(name: str, tmp_path: Path, capsys) -> str:
    module = importlib.import_module(f"benchmarks.{name}")
    argv = ["--quick"]
    if "--workdir" in (REPO / "benchmarks" / f"{name}.py").read_text():
        argv += ["--workdir", str(tmp_path / "bench")]  # never the repository's build/bench
    result = module.main(argv)
    assert result in (None, 0), f"{name} returned {result}"
    return capsys.readouterr().out


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_benchmark_completes_at_its_quick_setting_and_prints_ratios(name, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # anything a script writes relative to the working directory stays in tmp_path
    out = run_quick(name, tmp_path, capsys)
    assert RATIO.search(out), f"benchmarks/{name}.py printed no ratio:\n{out}"
    if name == "frames":
        frames_benchmark_ran_both_parts_with_the_sampler_as_it_is(out)


def frames_benchmark_ran_both_parts_with_the_sampler_as_it_is(out: str) -> None:
    # part 2 compares the build's extract_video_clips with the previous sampler; both must read back the planned
    # frames (encode_jpeg's output is (bytes, regions) since blurring, which part 2 once took for bytes)
    assert "part 1, one window" in out and "part 2, a lecture's clips" in out
    assert "after / before = " in out and "after / the cheaper floor = " in out
    assert out.count("returned the planned frames (painted indices checked)") == 1


def test_the_gpu_benchmark_parses_its_command_line(capsys):
    module = importlib.import_module("benchmarks.gpu_sft")
    with pytest.raises(SystemExit) as stop:
        module.main(["--help"])
    assert stop.value.code == 0 and "--tiny" in capsys.readouterr().out


def test_every_script_has_a_quick_setting():
    for name in SCRIPTS:
        assert "parse_with_quick(" in (REPO / "benchmarks" / f"{name}.py").read_text(), f"{name}.py has no --quick"
