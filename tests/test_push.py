"""Pushing a built folder: the right Hub calls, and the token is never printed."""

import pytest

from builders.sureon.build import BuildOptions, build_sureon
from sureon.cli import main as cli_main


SECRET = "hf_THISISASECRETTOKEN1234567890"


@pytest.fixture
def folder(tmp_path):
    from conftest import SAMPLE_RELEASE

    return build_sureon(BuildOptions(release=SAMPLE_RELEASE, out=tmp_path / "sureon", configs=["bench"])).out


def test_push_uploads_the_folder_as_a_dataset_repo(folder, monkeypatch, capsys, caplog):
    import huggingface_hub

    calls = {}

    class FakeApi:
        def __init__(self, token=None):
            calls["token"] = token

        def create_repo(self, repo_id, **kwargs):
            calls["create_repo"] = (repo_id, kwargs)

        def upload_folder(self, **kwargs):
            calls["upload_folder"] = kwargs
            return type(
                "Commit", (), {"commit_url": f"https://huggingface.co/datasets/{kwargs['repo_id']}/commit/1"}
            )()

    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    assert cli_main(["push", str(folder), "--repo-id", "my-org/sureon", "--private"]) == 0
    assert calls["create_repo"] == ("my-org/sureon", {"repo_type": "dataset", "private": True, "exist_ok": True})
    upload = calls["upload_folder"]
    assert (upload["repo_id"], upload["repo_type"], upload["folder_path"]) == ("my-org/sureon", "dataset", str(folder))
    assert calls["token"] is None  # huggingface_hub reads HF_TOKEN / the login itself
    printed = capsys.readouterr()
    assert "my-org/sureon" in printed.out
    assert SECRET not in printed.out + printed.err + caplog.text


def test_push_refuses_a_folder_that_was_not_built(tmp_path, capsys):
    assert cli_main(["push", str(tmp_path), "--repo-id", "my-org/x"]) == 2
    assert "build or train it first" in capsys.readouterr().err
