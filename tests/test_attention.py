"""`make gpu_setup`'s flash-attention decision (``recipes/model_io/attention.py``) and the attention a model loads with
(``recipes.model_io.modeling.default_attn_implementation``), with no GPU and no network: the machine, the answer of
the wheel's release and the Hub kernel's availability are stated (a local HTTP server stands in for GitHub)."""

import http.server
import importlib.util
import logging
import platform
import re
import socket
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from recipes.model_io import attention, modeling
from recipes.model_io.attention import HUB_KERNEL, NOTHING, SOURCE, WHEEL, Machine, decide, wheel_name


REPO = Path(__file__).resolve().parents[1]
PREFETCH_HUB_KERNEL = attention.prefetch_hub_kernel  # the real one, which the ``stated`` fixture replaces
KEEP = ["torch==2.14.1", "torchvision==0.29.1"]
H200 = Machine(
    torch_version="2.14.1+cu130",
    cuda="13.0",
    cxx11_abi=True,
    python="cp311",
    machine="x86_64",
    gpus=(("NVIDIA H200", (9, 0)),),
    nvcc="13.0",
    cpus=16,
    available_gib=120.0,
)


def published(url):
    return True, "HTTP 200"


def missing(url):
    return False, "HTTP 404 from github.com"


def unreachable(url):
    return None, "could not reach github.com: [Errno -2] Name or service not known"


def not_asked(url):
    raise AssertionError(f"the wheel was looked up: {url}")


@pytest.mark.parametrize(
    ("torch_version", "cuda", "abi", "python", "machine", "version", "expected"),
    [
        # assets of flash-attn's releases v2.7.4.post1 and v2.8.3, as published
        ("2.6.0+cu124", "12.4", False, "cp311", "x86_64", "2.7.4.post1",
         "flash_attn-2.7.4.post1+cu12torch2.6cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"),
        ("2.8.0+cu128", "12.8", True, "cp312", "x86_64", "2.8.3",
         "flash_attn-2.8.3+cu12torch2.8cxx11abiTRUE-cp312-cp312-linux_x86_64.whl"),
        # its setup.py's rule: CUDA 11 and 12 by their major, any other CUDA as 13 (its builds: 11.8, 12.3, 13.0)
        ("2.5.1+cu118", "11.8", False, "cp310", "x86_64", "2.8.3.post2",
         "flash_attn-2.8.3.post2+cu11torch2.5cxx11abiFALSE-cp310-cp310-linux_x86_64.whl"),
        ("2.10.0", "13.0", True, "cp313", "aarch64", "2.8.3.post2",
         "flash_attn-2.8.3.post2+cu13torch2.10cxx11abiTRUE-cp313-cp313-linux_aarch64.whl"),
        ("2.14.1+cu141", "14.1", True, "cp311", "x86_64", "2.8.3.post2",
         "flash_attn-2.8.3.post2+cu13torch2.14cxx11abiTRUE-cp311-cp311-linux_x86_64.whl"),
    ],
)  # fmt: skip
def test_the_wheel_name_is_the_one_flash_attn_setup_looks_for(
    torch_version, cuda, abi, python, machine, version, expected
):
    name = wheel_name(
        torch_version=torch_version, cuda=cuda, cxx11_abi=abi, python=python, machine=machine, version=version
    )
    assert name == expected
    assert attention.wheel_url(name, version) == (
        f"https://github.com/Dao-AILab/flash-attention/releases/download/v{version}/{expected}"
    )


@pytest.mark.skipif(torch.version.cuda is None, reason="a CUDA build of torch")
def test_the_installed_torch_names_its_wheel():
    """What flash-attn's setup reads (torch's version, torch.version.cuda, the C++11 ABI, the Python tag, the machine)
    is what read_machine gives the name, asked here through other APIs."""
    machine = attention.read_machine()
    name = wheel_name(
        torch_version=machine.torch_version,
        cuda=machine.cuda,
        cxx11_abi=machine.cxx11_abi,
        python=machine.python,
        machine=machine.machine,
    )
    release = ".".join(torch.__version__.split(".")[:2])
    cuda_major = int(torch.version.cuda.split(".")[0])
    abi = str(torch.compiled_with_cxx11_abi()).upper()
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert name == (
        f"flash_attn-2.8.3.post2+cu{cuda_major if cuda_major in (11, 12) else 13}torch{release}cxx11abi{abi}"
        f"-{python}-{python}-linux_{platform.machine()}.whl"
    )


class Release(http.server.BaseHTTPRequestHandler):
    """GitHub's answers for a release asset: a redirect to its storage, the asset's first byte, 404, a rate limit."""

    def do_GET(self):
        if self.path.startswith("/download/"):
            self.send_response(302)
            self.send_header("Location", self.path.replace("/download/", "/storage/"))
            self.end_headers()
        elif self.path == "/storage/published.whl" and self.headers["Range"] == "bytes=0-0":
            self.send_response(206)
            self.send_header("Content-Length", "1")
            self.end_headers()
            self.wfile.write(b"P")
        else:
            self.send_response({"/storage/limited.whl": 429}.get(self.path, 404))
            self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def release_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Release)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_the_wheel_check_asks_the_release_and_says_when_it_cannot_tell(release_server):
    assert attention.wheel_exists(f"{release_server}/download/published.whl") == (True, "HTTP 206")
    assert attention.wheel_exists(f"{release_server}/download/missing.whl") == (False, "HTTP 404 from 127.0.0.1")
    assert attention.wheel_exists(f"{release_server}/download/limited.whl") == (None, "HTTP 429 from 127.0.0.1")
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    exists, reason = attention.wheel_exists(f"http://127.0.0.1:{port}/download/published.whl", timeout=2)
    assert exists is None and reason.startswith("could not reach 127.0.0.1: ")


def test_a_published_wheel_is_installed_from_its_url_never_built():
    asked = []
    plan = decide(H200, from_source=False, environ={}, check_wheel=lambda url: asked.append(url) or published(url))
    expected = wheel_name(torch_version="2.14.1+cu130", cuda="13.0", cxx11_abi=True, python="cp311", machine="x86_64")
    assert plan.path == WHEEL and asked == [plan.wheel_url] and plan.wheel_url.endswith(f"/v2.8.3.post2/{expected}")
    assert plan.lines[-1].startswith("decision: install flash-attn 2.8.3.post2 from that wheel")


def test_transformers_takes_the_hub_kernel_it_swaps_in_for_flash_attention_2():
    """The name and version transformers 5.25 loads for ``flash_attention_2`` without flash-attn, on CUDA."""
    from transformers.integrations.hub_kernels import is_kernel

    assert attention.hub_kernel() == ("kernels-community/flash-attn2", 4)
    assert is_kernel("kernels-community/flash-attn2")


@pytest.mark.parametrize("check", [missing, unreachable])
def test_without_a_wheel_the_hub_kernel_is_taken_not_a_compile(check):
    plan = decide(H200, from_source=False, environ={}, check_wheel=check)
    assert plan.path == HUB_KERNEL and not plan.build_env
    state = "not published" if check is missing else "cannot tell"
    assert f"cu13torch2.14cxx11abiTRUE-cp311-cp311-linux_x86_64.whl: {state} ({check('')[1]})" in plan.lines[1]
    assert "kernels-community/flash-attn2 v4" in plan.lines[-1] and "FLASH_ATTN_FROM_SOURCE=1" in plan.lines[-1]


def test_a_source_build_is_taken_only_when_asked_for_the_visible_gpus():
    assert decide(H200, from_source=False, environ={}, check_wheel=missing).path != SOURCE
    plan = decide(H200, from_source=True, environ={}, check_wheel=not_asked)
    assert plan.path == SOURCE
    assert plan.build_env == {"FLASH_ATTN_CUDA_ARCHS": "90", "MAX_JOBS": "8", "FLASH_ATTENTION_FORCE_BUILD": "TRUE"}
    assert any(line.startswith("MAX_JOBS=8: 16 cores / 2 and 120 GiB available / 9 GiB a job") for line in plan.lines)
    mixed = replace(H200, gpus=(("NVIDIA H200", (9, 0)), ("NVIDIA RTX A6000", (8, 6)), ("NVIDIA B200", (10, 0))))
    assert decide(mixed, from_source=True, environ={}).build_env["FLASH_ATTN_CUDA_ARCHS"] == "80;90;100"


@pytest.mark.parametrize(
    ("cpus", "gib", "environ", "jobs"),
    [(16, 120.0, {}, 8), (64, 40.0, {}, 4), (2, 5.0, {}, 1), (16, 120.0, {"MAX_JOBS": "3"}, 3)],
)
def test_max_jobs_follows_cores_and_memory_unless_set(cpus, gib, environ, jobs):
    plan = decide(replace(H200, cpus=cpus, available_gib=gib), from_source=True, environ=environ)
    assert plan.build_env["MAX_JOBS"] == str(jobs)


@pytest.mark.parametrize(
    ("machine", "environ", "phrase"),
    [
        (replace(H200, nvcc="12.8"), {}, "nvcc is CUDA 12.8"),
        (replace(H200, nvcc=None), {}, "needs nvcc of CUDA 13.x"),
        (replace(H200, gpus=()), {}, "no GPU visible"),
        (replace(H200, gpus=(("Jetson Thor", (11, 0)),)), {}, "no build for Jetson Thor (sm_110)"),
        (H200, {"FLASH_ATTN_CUDA_ARCHS": "86"}, "FLASH_ATTN_CUDA_ARCHS=86: flash-attn 2.8.3.post2 compiles for 80"),
        (H200, {"MAX_JOBS": "all"}, "MAX_JOBS=all"),
    ],
)
def test_a_source_build_that_cannot_start_is_refused_before_anything_runs(machine, environ, phrase):
    with pytest.raises(attention.InputError, match=re.escape(phrase)):
        decide(machine, from_source=True, environ=environ, check_wheel=not_asked)


def test_the_architectures_can_be_stated():
    plan = decide(replace(H200, gpus=()), from_source=True, environ={"FLASH_ATTN_CUDA_ARCHS": "90;100"})
    assert plan.build_env["FLASH_ATTN_CUDA_ARCHS"] == "90;100"


def test_a_gpu_older_than_ampere_gets_nothing():
    plan = decide(replace(H200, gpus=(("Tesla T4", (7, 5)),)), from_source=True, environ={}, check_wheel=not_asked)
    assert plan.path == NOTHING and "not on Tesla T4 (sm_75)" in plan.lines[-1]


@pytest.fixture
def stated(monkeypatch):
    """main() on a stated machine; every pip call, kernel fetch and import check recorded instead of run."""
    calls = {"pip": [], "prefetch": []}
    monkeypatch.setattr(attention, "read_machine", lambda: H200)
    monkeypatch.setattr(attention, "run_pip", lambda arguments, env=None: calls["pip"].append((list(arguments), env)))
    monkeypatch.setattr(attention, "check_import", lambda: "2.8.3.post2")
    monkeypatch.setattr(
        attention, "prefetch_hub_kernel", lambda repo, version: calls["prefetch"].append((repo, version)) or "CACHE"
    )
    monkeypatch.delenv("FLASH_ATTN_FROM_SOURCE", raising=False)
    monkeypatch.delenv("FLASH_ATTN_CUDA_ARCHS", raising=False)
    monkeypatch.delenv("MAX_JOBS", raising=False)
    return calls


def run_main(capsys, *argv):
    status = attention.main(list(argv))
    out, err = capsys.readouterr()
    return status, out.splitlines(), err.strip()


def test_make_gpu_setup_installs_the_published_wheel(stated, monkeypatch, capsys):
    monkeypatch.setattr(attention, "wheel_exists", published)
    status, out, _ = run_main(capsys, "--keep", *KEEP)
    assert status == 0 and stated["prefetch"] == []
    [(arguments, _)] = stated["pip"]
    assert arguments[0].startswith("https://github.com/Dao-AILab/flash-attention/releases/download/v2.8.3.post2/")
    assert arguments[1:] == KEEP and "--no-build-isolation" not in arguments
    assert all(line.startswith("flash-attention: ") for line in out) and out[-1].endswith("2.8.3.post2 imports")


def test_make_gpu_setup_fetches_the_hub_kernel_without_a_wheel(stated, monkeypatch, capsys):
    monkeypatch.setattr(attention, "wheel_exists", missing)
    status, out, _ = run_main(capsys, "--keep", *KEEP)
    assert status == 0 and stated["pip"] == [] and stated["prefetch"] == [("kernels-community/flash-attn2", 4)]
    assert out[-1] == (
        "flash-attention: kernels-community/flash-attn2 v4 loads on this GPU, and from CACHE with HF_HUB_OFFLINE=1"
    )


def test_make_gpu_setup_compiles_with_the_build_settings_when_asked(stated, monkeypatch, capsys):
    monkeypatch.setattr(attention, "wheel_exists", not_asked)
    monkeypatch.setenv("FLASH_ATTN_FROM_SOURCE", "1")
    assert run_main(capsys, "--keep", *KEEP)[0] == 0
    [tools, (build, env)] = stated["pip"]
    assert "ninja" in tools[0] and build == ["--no-build-isolation", "flash-attn==2.8.3.post2", *KEEP]
    assert env == {"FLASH_ATTN_CUDA_ARCHS": "90", "MAX_JOBS": "8", "FLASH_ATTENTION_FORCE_BUILD": "TRUE"}


@pytest.mark.parametrize(
    ("machine", "environ", "phrase"),
    [
        (replace(H200, nvcc="12.8"), {"FLASH_ATTN_FROM_SOURCE": "1"}, "nvcc is CUDA 12.8"),
        (H200, {"FLASH_ATTN_FROM_SOURCE": "yes"}, "FLASH_ATTN_FROM_SOURCE=yes: use 1"),
    ],
)
def test_a_refusal_is_one_line_and_installs_nothing(stated, monkeypatch, capsys, machine, environ, phrase):
    monkeypatch.setattr(attention, "read_machine", lambda: machine)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    status, _, err = run_main(capsys, "--keep", *KEEP)
    assert status == 2 and err.startswith("error: ") and phrase in err and "\n" not in err
    assert stated["pip"] == [] and stated["prefetch"] == []


@pytest.mark.parametrize(
    ("failure", "phrase"),
    [
        (FileNotFoundError("Cannot find a build variant for this system in kernels-community/flash-attn2:\n- a"),
         "FileNotFoundError: Cannot find a build variant for this system in kernels-community/flash-attn2:"),
        # kernels words a Hub it could not reach as a publisher it could not verify: the cause is what is shown
        (ValueError("Kernel repository could not verify publisher trust status. Set trust_remote_code=True"),
         "OSError: [Errno -2] Name or service not known"),
    ],
)  # fmt: skip
def test_a_hub_kernel_that_cannot_be_fetched_stops_in_one_line(stated, monkeypatch, capsys, failure, phrase):
    def get_kernel(repo, version):
        raise failure from (OSError(-2, "Name or service not known") if isinstance(failure, ValueError) else None)

    monkeypatch.setattr(attention, "wheel_exists", missing)
    monkeypatch.setattr(attention, "prefetch_hub_kernel", PREFETCH_HUB_KERNEL)
    monkeypatch.setattr("kernels.get_kernel", get_kernel)
    status, _, err = run_main(capsys, "--keep", *KEEP)
    assert (
        status == 2
        and err.startswith("error: no prebuilt flash-attention for this torch and CUDA")
        and "\n" not in err
    )
    assert phrase in err and "FLASH_ATTN_FROM_SOURCE=1 make gpu_setup" in err and "trust_remote_code" not in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="a machine without CUDA")
def test_without_cuda_it_refuses_unless_a_dry_run(monkeypatch, capsys):
    """On this machine's own torch and (absent) GPU: one line and exit 2; a dry run decides and checks instead."""
    monkeypatch.delenv("FLASH_ATTN_FROM_SOURCE", raising=False)
    monkeypatch.setattr(attention, "wheel_exists", missing)
    monkeypatch.setattr(attention, "run_pip", lambda *args, **kwargs: pytest.fail("pip ran"))
    status, out, err = run_main(capsys, "--keep", *KEEP)
    assert status == 2 and out == [] and "\n" not in err
    assert err.startswith("error: no CUDA GPU is visible") and "DRY_RUN=1" in err
    probed = []
    monkeypatch.setattr(
        attention, "probe_hub_kernel", lambda *args, **kwargs: probed.append((args, kwargs)) or (True, "a build")
    )
    status, out, err = run_main(capsys, "--dry-run", "--keep", *KEEP)
    assert status == 0 and probed == [(("kernels-community/flash-attn2", 4), {"check_arch": False})]
    assert out[0].startswith(f"flash-attention: torch {torch.__version__}") and "GPUs: none visible" in out[0]
    assert out[-1] == "flash-attention: dry run: kernels-community/flash-attn2 v4: a build"


def test_a_dry_run_stops_where_the_install_would(stated, monkeypatch, capsys):
    monkeypatch.setattr(attention, "wheel_exists", missing)
    monkeypatch.setattr(attention, "probe_hub_kernel", lambda *args, **kwargs: (False, "no build for this torch"))
    status, _, err = run_main(capsys, "--dry-run", "--keep", *KEEP)
    assert status == 2 and "would stop here" in err and stated["pip"] == [] and stated["prefetch"] == []


def test_the_make_target_runs_the_decision_and_ci_its_dry_run():
    commands = subprocess.run(
        ["make", "-n", "gpu_setup", "DRY_RUN=1", "STAMP=/dev/null"],
        check=True,
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout
    assert "-m recipes.model_io.attention --dry-run --keep torch==" in commands
    assert "--no-build-isolation" not in commands and "flash-attn==" not in commands
    assert "make gpu_setup DRY_RUN=1" in (REPO / ".ci" / "run").read_text()


@pytest.fixture
def on_a_gpu(monkeypatch):
    """default_attn_implementation's view of an H200 with flash-attn absent (``flash_attn_installed`` flips it) and the
    Hub kernel's availability as ``kernels.has_kernel`` answers it."""
    real_find_spec = importlib.util.find_spec
    state = {"flash_attn": False, "has_kernel": lambda *args, **kwargs: True, "asked": []}

    def find_spec(name, *args, **kwargs):
        if name == "flash_attn":
            return real_find_spec("torch") if state["flash_attn"] else None
        return real_find_spec(name, *args, **kwargs)

    def has_kernel(repo, **kwargs):
        state["asked"].append((repo, kwargs))
        return state["has_kernel"](repo, **kwargs)

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (9, 0))
    monkeypatch.setattr(importlib.util, "find_spec", find_spec)
    monkeypatch.setattr("kernels.has_kernel", has_kernel)
    return state


def test_attention_is_sdpa_without_a_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert modeling.default_attn_implementation() == "sdpa"


def test_attention_is_flash_attn_when_installed(on_a_gpu):
    on_a_gpu["flash_attn"] = True
    assert modeling.default_attn_implementation() == "flash_attention_2" and on_a_gpu["asked"] == []


def test_attention_is_the_hub_kernel_when_transformers_can_load_it(on_a_gpu):
    assert modeling.default_attn_implementation() == "kernels-community/flash-attn2"
    assert on_a_gpu["asked"] == [("kernels-community/flash-attn2", {"version": 4, "check_arch": True})]


@pytest.mark.parametrize(
    "answer",
    [lambda *args, **kwargs: False, lambda *args, **kwargs: (_ for _ in ()).throw(ValueError("Hub unreachable"))],
)
def test_attention_falls_back_to_sdpa_with_a_warning_that_points_to_gpu_setup(on_a_gpu, caplog, answer):
    on_a_gpu["has_kernel"] = answer
    with caplog.at_level(logging.WARNING, logger=modeling.__name__):
        assert modeling.default_attn_implementation() == "sdpa"
    [warning] = [record.getMessage() for record in caplog.records if record.name == modeling.__name__]
    assert "kernels-community/flash-attn2 v4 cannot be loaded" in warning and "make gpu_setup" in warning
    assert "HF_HUB_OFFLINE=1" in warning


def test_attention_is_sdpa_on_a_gpu_older_than_ampere(on_a_gpu, monkeypatch):
    on_a_gpu["flash_attn"] = True
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))
    assert modeling.default_attn_implementation() == "sdpa"


def test_offline_a_kernel_that_is_not_in_the_cache_is_not_loadable(monkeypatch, tmp_path):
    """kernels' real check under HF_HUB_OFFLINE=1 with an empty cache: a reason, no Hub request."""
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("KERNELS_CACHE", str(tmp_path))
    problem = attention.hub_kernel_problem()
    assert problem is not None and "offline" in problem


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_on_a_gpu_the_source_build_targets_its_architecture():
    """This GPU's own capability and nvcc: the source build would target its architecture, and the default attention
    is one of the three."""
    machine = attention.read_machine()
    capability = torch.cuda.get_device_capability(0)
    if machine.nvcc and attention.major(machine.nvcc) == attention.major(machine.cuda):
        plan = decide(machine, from_source=True, environ={})
        assert attention.SOURCE_ARCHS[capability[0]] in plan.build_env["FLASH_ATTN_CUDA_ARCHS"].split(";")
    assert modeling.default_attn_implementation() in {"flash_attention_2", attention.hub_kernel()[0], "sdpa"}
