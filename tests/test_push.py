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
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # the tests run offline; FakeApi is all
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


def test_push_checks_everything_before_contacting_the_hub(folder, tmp_path, monkeypatch, capsys):
    """Offline, not logged in, a bad repo id: one line each, and HfApi is never built."""
    import huggingface_hub

    def no_api(*args, **kwargs):
        raise AssertionError("the Hub was contacted")

    monkeypatch.setattr(huggingface_hub, "HfApi", no_api)
    assert cli_main(["push", str(folder), "--repo-id", "my-org/sureon"]) == 2  # HF_HUB_OFFLINE=1 in the tests
    assert "offline mode (HF_HUB_OFFLINE is set)" in capsys.readouterr().err
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    assert cli_main(["push", str(folder), "--repo-id", "not a repo id"]) == 2
    assert "is not a Hub repo id" in capsys.readouterr().err
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_TOKEN_PATH", str(tmp_path / "no-token"))
    assert cli_main(["push", str(folder), "--repo-id", "my-org/sureon"]) == 2
    assert "no Hugging Face token to push with: log in with `hf auth login`" in capsys.readouterr().err


def test_a_hub_that_refuses_the_token_is_one_line_without_the_token(folder, monkeypatch, capsys, caplog):
    import httpx2  # huggingface_hub's own HTTP library, whose responses its errors carry
    import huggingface_hub
    from huggingface_hub.errors import HfHubHTTPError

    class RefusingApi:
        endpoint = "https://huggingface.co"

        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kwargs):
            request = httpx2.Request("POST", f"{self.endpoint}/api/repos/create")
            raise HfHubHTTPError("401 Unauthorized", response=httpx2.Response(401, request=request))

    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setattr(huggingface_hub, "HfApi", RefusingApi)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    assert cli_main(["push", str(folder), "--repo-id", "my-org/sureon"]) == 2
    err = capsys.readouterr().err
    assert "the Hub refused the token (HTTP 401)" in err and "Traceback" not in err
    assert SECRET not in err + caplog.text
