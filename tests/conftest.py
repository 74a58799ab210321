"""Shared fixtures. Everything runs offline: the Hub is never contacted, fixtures are generated in the session."""

import copy
import os
import shutil
from pathlib import Path

import pytest

from sample_data.make_sample_release import SCHEMA, release_rows, write_release
from sample_data.make_videos import SAMPLE_VIDEOS, write_sample_videos


# Set before any test module imports huggingface_hub or datasets (neither is imported above).
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")
os.environ["TOKENIZERS_PARALLELISM"] = "false"


REPO = Path(__file__).resolve().parents[1]
SAMPLE_RELEASE = REPO / "sample_data" / "sureon_release"


@pytest.fixture(autouse=True)
def _isolated_caches(tmp_path, monkeypatch):
    """Each test gets its own ``datasets`` cache and frame cache, out of the user's home."""
    import datasets

    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf_datasets_cache")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg_cache"))


@pytest.fixture(scope="session")
def sample_videos(tmp_path_factory) -> Path:
    """The sample source videos (written once per session with PyAV)."""
    out = tmp_path_factory.mktemp("videos")
    write_sample_videos(out)
    return out


@pytest.fixture
def videos_copy(sample_videos, tmp_path) -> Path:
    """A private copy of the sample videos that a test may delete from or corrupt."""
    out = tmp_path / "videos"
    shutil.copytree(sample_videos, out)
    return out


@pytest.fixture
def rows():
    """The sample release rows per split, a fresh copy a test may edit."""
    return copy.deepcopy(release_rows())


@pytest.fixture
def write_rows(tmp_path):
    """Write edited rows as a release folder: ``write_rows(rows, schema=None)`` -> folder."""
    counter = iter(range(1000))

    def write(rows_by_split, schema=SCHEMA):
        return write_release(tmp_path / f"release{next(counter)}", rows_by_split, schema)

    return write


@pytest.fixture
def fps_of():
    return {spec.source_id: spec.fps for spec in SAMPLE_VIDEOS}


@pytest.fixture(scope="session")
def sureon_build(sample_videos, tmp_path_factory):
    """The sample release built once per session with frames (all configs); tests must not modify it."""
    from builders.sureon.build import BuildOptions, build_sureon

    tmp = tmp_path_factory.mktemp("sureon_build")
    options = BuildOptions(
        release=SAMPLE_RELEASE, out=tmp / "out", videos=sample_videos, cache_dir=tmp / "cache", on_missing_video="skip"
    )
    return build_sureon(options)


@pytest.fixture(scope="session")
def bench(sample_videos, tmp_path_factory) -> Path:
    """The demo benchmark, built once per session as `make demo` builds it (the sample release's bench config, the
    missing video skipped); read-only for tests. A module may still define its own ``bench``."""
    import datasets

    from builders.sureon.build import BuildOptions, build_sureon

    tmp = tmp_path_factory.mktemp("demo_bench")
    with pytest.MonkeyPatch.context() as patch:  # datasets' cache out of the user's home for a session fixture
        patch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp / "hf_datasets_cache")
        options = BuildOptions(
            release=SAMPLE_RELEASE,
            out=tmp / "sureon",
            videos=sample_videos,
            configs=["bench"],
            on_missing_video="skip",
            cache_dir=tmp / "frame-cache",
        )
        return build_sureon(options).out


@pytest.fixture(scope="session")
def tiny_qwen3_vl(tmp_path_factory) -> Path:
    """A random 2-layer Qwen3-VL with its processor, saved once per session (read-only for tests)."""
    from recipes.training.tiny_models import build_tiny_qwen3_vl

    return build_tiny_qwen3_vl(tmp_path_factory.mktemp("tiny") / "qwen3-vl")


@pytest.fixture(scope="session")
def tiny_causal_lm(tmp_path_factory) -> Path:
    """A random 2-layer text-only Qwen3 with its tokenizer, saved once per session (read-only for tests)."""
    from recipes.training.tiny_models import build_tiny_causal_lm

    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny") / "qwen3")
