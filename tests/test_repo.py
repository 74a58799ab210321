"""The repository's promises: README commands point at real targets and files, the sample data is current."""

import re
import tomllib

import pyarrow.parquet as pq
import pytest
from conftest import REPO, SAMPLE_RELEASE

from sample_data.make_sample_release import SCHEMA, release_rows


README = (REPO / "README.md").read_text()
MAKEFILE = (REPO / "Makefile").read_text()


def make_targets():
    return set(re.findall(r"^([a-z_]+):", MAKEFILE, flags=re.MULTILINE))


def test_readme_make_commands_exist():
    used = set(re.findall(r"`?make ([a-z_]+)", README))
    assert {"demo", "test"} <= used
    assert used <= make_targets(), used - make_targets()


def test_readme_paths_exist():
    folders = r"(?:builders|sample_data|benchmarks|recipes|model_cards|tests|accelerate_configs|\.ci)"
    paths = set(re.findall(rf"`({folders}/[\w./-]*)`", README))
    assert paths, "the README names no repository paths"
    missing = [p for p in paths if not (REPO / p).exists() and not p.startswith("sample_data/sureon_release/")]
    assert not missing


def test_readme_launch_commands_point_at_existing_files():
    commands = re.findall(r"(?:accelerate launch|python)[^\n]*(?:\\\n[^\n]*)*", README)
    named = [path for command in commands for path in re.findall(r"(?:--config_file|--config)\s+([^\s`]+)", command)]
    scripts = [path for command in commands for path in re.findall(r"\s(recipes/\w+\.py)", command)]
    assert "accelerate_configs/zero3.yaml" in named and "recipes/sft.py" in scripts
    missing = [path for path in named + scripts if not (REPO / path).is_file()]
    assert not missing


def test_demo_target_runs_the_builder_on_the_bundled_sample():
    demo = MAKEFILE.split("\ndemo:")[1].split("\n\n")[0]
    assert "sample_data/make_videos.py" in demo and "sureon build sureon" in demo
    assert "--release sample_data/sureon_release" in demo


def test_ci_runs_the_readme_test_command():
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_console_script_and_packages():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["sureon"] == "builders.cli:main"
    assert {"gpu", "vllm", "dev"} <= set(project["optional-dependencies"])


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_committed_sample_release_matches_its_generator(split):
    table = pq.read_table(SAMPLE_RELEASE / "data" / f"{split}-00000-of-00001.parquet")
    assert table.schema.equals(SCHEMA)
    assert table.to_pylist() == release_rows()[split]


def test_readme_lists_every_public_source_as_the_code_declares_it():
    from public_converters.spec import registry, sources_markdown

    assert len(registry()) == 22
    assert sources_markdown() in README, "regenerate the table with: python -m public_converters.spec"
