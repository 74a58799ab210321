"""Pushing a build or a finished training run: the right Hub calls, the repo type read from the folder, what is
never uploaded, and the token never printed. What a push refuses is in tests/bad_inputs/test_models.py."""

import json
import shutil
from pathlib import Path

import pytest

from builders.sureon.build import BuildOptions, build_sureon
from sureon.cli import main as cli_main


SECRET = "hf_THISISASECRETTOKEN1234567890"


@pytest.fixture
def folder(tmp_path):
    from conftest import SAMPLE_RELEASE

    return build_sureon(BuildOptions(release=SAMPLE_RELEASE, out=tmp_path / "sureon", configs=["bench"])).out


def fake_hub(monkeypatch) -> dict:
    """HfApi replaced by a recorder: the calls made, and the files the upload would send (the folder's files filtered
    by the ignore patterns given, as ``upload_folder`` filters them)."""
    import huggingface_hub
    from huggingface_hub.utils import filter_repo_objects

    calls = {}

    class FakeApi:
        def __init__(self, token=None):
            calls["token"] = token

        def create_repo(self, repo_id, **kwargs):
            calls["create_repo"] = (repo_id, kwargs)

        def upload_folder(self, **kwargs):
            calls["upload_folder"] = kwargs
            root = Path(kwargs["folder_path"])
            files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
            calls["uploaded"] = list(filter_repo_objects(files, ignore_patterns=kwargs.get("ignore_patterns")))
            kind = "datasets/" if kwargs["repo_type"] == "dataset" else ""
            return type("Commit", (), {"commit_url": f"https://huggingface.co/{kind}{kwargs['repo_id']}/commit/1"})()

    monkeypatch.setenv("HF_TOKEN", SECRET)
    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)  # the tests run offline; FakeApi is all
    return calls


def finished_run(tiny_causal_lm, folder: Path) -> Path:
    """A training run's output_dir as recipes/sft.py leaves it: the model, its card and training_complete.json, and
    the Trainer's checkpoint beside them."""
    shutil.copytree(tiny_causal_lm, folder)
    (folder / "README.md").write_text("---\nlibrary_name: transformers\n---\n# tiny\n")
    (folder / "training_complete.json").write_text(json.dumps({"name": None, "mixture": []}))
    checkpoint = folder / "checkpoint-2"
    checkpoint.mkdir()
    for name in ("model.safetensors", "optimizer.pt", "trainer_state.json"):
        (checkpoint / name).write_bytes(b"state")
    return folder


def test_push_uploads_the_folder_as_a_dataset_repo(folder, monkeypatch, capsys, caplog):
    calls = fake_hub(monkeypatch)
    assert cli_main(["push", str(folder), "--repo-id", "my-org/sureon", "--private"]) == 0
    assert calls["create_repo"] == ("my-org/sureon", {"repo_type": "dataset", "private": True, "exist_ok": True})
    upload = calls["upload_folder"]
    assert (upload["repo_id"], upload["repo_type"], upload["folder_path"]) == ("my-org/sureon", "dataset", str(folder))
    assert calls["token"] is None  # huggingface_hub reads HF_TOKEN / the login itself
    assert "README.md" in calls["uploaded"] and ".sureon-output" not in calls["uploaded"]
    printed = capsys.readouterr()
    assert "my-org/sureon" in printed.out
    assert SECRET not in printed.out + printed.err + caplog.text


def test_a_finished_training_run_is_pushed_as_a_model_repo_without_its_checkpoints(
    tiny_causal_lm, tmp_path, monkeypatch, capsys
):
    """Before, `sureon push` made any folder with a README.md a dataset repo: a trained model became a dataset holding
    its weights (and its checkpoints were skipped only at the top). Now the type is read from the folder, and the
    call recipes/sft.py and recipes/grpo.py make at the end of a run (repo_type="model") pushes the same files."""
    from builders.hub import push_folder

    run = finished_run(tiny_causal_lm, tmp_path / "run")
    calls = fake_hub(monkeypatch)
    assert cli_main(["push", str(run), "--repo-id", "my-org/tiny"]) == 0
    assert calls["create_repo"] == ("my-org/tiny", {"repo_type": "model", "private": False, "exist_ok": True})
    assert calls["upload_folder"]["repo_type"] == "model"
    expected = sorted(p.name for p in run.iterdir() if p.is_file())
    assert calls["uploaded"] == expected and "model.safetensors" in expected
    assert "https://huggingface.co/my-org/tiny/commit/1" in capsys.readouterr().out
    uploaded = calls["uploaded"]
    assert (
        push_folder(run, "my-org/tiny", token=None, repo_type="model") == "https://huggingface.co/my-org/tiny/commit/1"
    )
    assert calls["uploaded"] == uploaded


def test_a_checkpoint_of_a_later_stage_is_not_uploaded_either(tiny_causal_lm, tmp_path, monkeypatch):
    run = finished_run(tiny_causal_lm, tmp_path / "run")
    nested = run / "runs" / "checkpoint-7"
    nested.mkdir(parents=True)
    (nested / "optimizer.pt").write_bytes(b"state")
    (run / "runs" / "events.out").write_text("log")
    calls = fake_hub(monkeypatch)
    assert cli_main(["push", str(run), "--repo-id", "my-org/tiny"]) == 0
    assert "runs/events.out" in calls["uploaded"]
    assert not [path for path in calls["uploaded"] if "checkpoint-" in path]


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
