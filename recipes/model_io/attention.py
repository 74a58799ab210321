"""How ``make gpu_setup`` gets flash-attention 2 in minutes, never by an unplanned compile of hours.

flash-attn 2.8.3.post2 is published as an sdist only. Its ``setup.py`` (``get_wheel_url``) looks for a prebuilt wheel
on its GitHub release, named after torch's major.minor, the CUDA major torch was built with, torch's C++11 ABI and the
Python tag, and compiles its 72 CUDA files when there is none: hours, for four GPU architectures, and only with an
nvcc of torch's CUDA major. Its release workflow builds wheels for torch 2.6 to 2.10 (Dao-AILab/flash-attention#2425:
none for torch 2.11), so the torch this project pins has none. transformers 5.25 loads the same kernels prebuilt from
the Hub instead, through ``kernels`` (``kernels-community/flash-attn2``: ``transformers/integrations/hub_kernels.py``),
in a build per torch, CUDA, C++ ABI and Python (kernels 0.19.1, ``_internals/variants.py``). ``make gpu_setup`` runs
:func:`main`, which takes the first of:

1. flash-attn's wheel, when its release has one for this torch, CUDA, ABI and Python (its first byte asked for, not
   assumed): pip installs it from its URL, the file flash-attn's setup would fetch, and never builds it;
2. else the Hub kernel, fetched into the Hugging Face cache for this torch and CUDA and loaded once on the GPU, so that
   later runs load it with ``HF_HUB_OFFLINE=1`` (air-gapped);
3. a source build only when asked (``FLASH_ATTN_FROM_SOURCE=1``): for the visible GPUs' architectures instead of
   four, with ``MAX_JOBS`` from the cores and memory, and nvcc's CUDA major checked against torch's before it starts.

It prints one line per decision with its reason; ``--dry-run`` decides, checks what a CPU can check (the wheel, the Hub
kernel's build for this torch and CUDA) and installs nothing. :func:`hub_kernel_problem` is what
``recipes.model_io.modeling.default_attn_implementation`` asks before it picks the Hub kernel.
"""

import argparse
import os
import platform
import re
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from builders.errors import InputError, UserError, report_mistakes


FLASH_ATTN_VERSION = "2.8.3.post2"
FLASH_ATTN = f"flash-attn=={FLASH_ATTN_VERSION}"
RELEASE_ASSET_URL = "https://github.com/Dao-AILab/flash-attention/releases/download/v{version}/{wheel}"
# The architectures flash-attn's setup.py compiles for (FLASH_ATTN_CUDA_ARCHS; it ignores any other value), by the
# compute capability's major: a build runs on later minors of its major (sm_80's on sm_86 and sm_89), the rule kernels
# applies too (``_internals/archs.py``).
SOURCE_ARCHS = {8: "80", 9: "90", 10: "100", 12: "120"}
# flash-attention 2 runs on Ampere and newer (flash-attn's README: "Ampere, Ada, or Hopper GPUs").
MIN_CAPABILITY = (8, 0)
# flash-attn's setup.py (``NinjaBuildExtension``) when MAX_JOBS is unset: one compiler job per two cores, and per 9 GB
# of available memory ("each JOB peak memory cost is ~8-9GB when threads = 4", nvcc's default threads there).
GIB_PER_JOB = 9
BUILD_TOOLS = ["ninja", "packaging", "wheel", "psutil"]  # what flash-attn's setup.py imports besides torch
CHECK_TIMEOUT_S = 10
WHEEL, HUB_KERNEL, SOURCE, NOTHING = "wheel", "hub kernel", "source", "nothing"


@dataclass(frozen=True)
class Machine:
    """What the choice depends on: read by :func:`read_machine`, stated by the tests."""

    torch_version: str
    cuda: str | None  # the CUDA torch was built with (torch.version.cuda); None for a CPU build
    cxx11_abi: bool
    python: str  # the wheel tag of this Python: "cp311"
    machine: str  # "x86_64", "aarch64"
    gpus: tuple[tuple[str, tuple[int, int]], ...] = ()  # each visible GPU's name and compute capability
    nvcc: str | None = None  # the CUDA release of the nvcc torch's extension builder would run; None if none
    cpus: int = 1
    available_gib: float = 0.0

    def describe(self) -> str:
        build = f"CUDA {self.cuda}" if self.cuda else "a CPU build"
        gpus = ", ".join(f"{name} ({sm(capability)})" for name, capability in self.gpus) or "none visible"
        return (
            f"torch {self.torch_version} ({build}, C++11 ABI {str(self.cxx11_abi).upper()}), {self.python} on "
            f"linux_{self.machine}; GPUs: {gpus}"
        )


@dataclass
class Plan:
    """The path :func:`decide` took and its lines, one per decision with its reason."""

    path: str
    lines: list[str]
    wheel_url: str | None = None
    build_env: dict[str, str] = field(default_factory=dict)


def sm(capability: tuple[int, int]) -> str:
    return f"sm_{capability[0]}{capability[1]}"


def major(version: str) -> int:
    return int(version.split(".")[0])


def wheel_name(
    *, torch_version: str, cuda: str, cxx11_abi: bool, python: str, machine: str, version: str = FLASH_ATTN_VERSION
) -> str:
    """The wheel flash-attn's setup.py looks for (``get_wheel_url``): torch's major.minor, and CUDA 11, 12 or else 13
    (its release builds against 11.8, 12.3 and 13.0, and names a wheel by the major only)."""
    torch_release = ".".join(torch_version.split("+")[0].split(".")[:2])
    cuda_major = major(cuda) if major(cuda) in (11, 12) else 13
    abi = str(cxx11_abi).upper()
    build = f"cu{cuda_major}torch{torch_release}cxx11abi{abi}"
    return f"flash_attn-{version}+{build}-{python}-{python}-linux_{machine}.whl"


def wheel_url(name: str, version: str = FLASH_ATTN_VERSION) -> str:
    return RELEASE_ASSET_URL.format(version=version, wheel=name)


def wheel_exists(url: str, timeout: float = CHECK_TIMEOUT_S) -> tuple[bool | None, str]:
    """Whether the release has the asset at ``url``, and why: True, False (HTTP 404), or None when this machine cannot
    tell (no connection, a timeout, another HTTP status such as a rate limit). Its first byte is asked for (a range
    GET), through GitHub's redirect of a release asset to its storage, whose signed address is made for a GET."""
    host = urllib.parse.urlsplit(url).hostname
    request = urllib.request.Request(url, headers={"Range": "bytes=0-0"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # closed unread: nothing more downloads
            return True, f"HTTP {response.status}"
    except urllib.error.HTTPError as err:
        return (False if err.code == 404 else None), f"HTTP {err.code} from {host}"
    except (urllib.error.URLError, OSError) as err:  # no route, no name resolution, a timeout
        return None, f"could not reach {host}: {getattr(err, 'reason', err)}"


def hub_kernel() -> tuple[str, int]:
    """The Hub kernel transformers swaps in for ``flash_attention_2`` when flash-attn is missing, and the kernel
    version it loads (``FLASH_ATTN_KERNEL_FALLBACK``, ``get_attn_kernel_version``)."""
    from transformers.integrations.hub_kernels import get_attn_kernel_version
    from transformers.modeling_flash_attention_utils import FLASH_ATTN_KERNEL_FALLBACK

    repo = FLASH_ATTN_KERNEL_FALLBACK["flash_attention_2"]
    return repo, get_attn_kernel_version(repo)


def probe_hub_kernel(repo: str, version: int, *, check_arch: bool) -> tuple[bool | None, str]:
    """Whether ``repo`` has a build this environment loads, and why: kernels' own check (``has_kernel``), which reads
    the Hugging Face cache only under ``HF_HUB_OFFLINE=1`` and asks the Hub otherwise, as transformers' load does;
    ``check_arch`` also checks the build against this GPU. None when it cannot tell (the Hub unreachable, the version
    not in the cache)."""
    from kernels import has_kernel

    try:
        found = has_kernel(repo, version=version, check_arch=check_arch)
    except Exception as err:  # noqa: BLE001 - kernels' ValueError, the Hub client's errors: any means "cannot load"
        return None, root_cause(err)
    environment = "torch, CUDA, Python and GPU" if check_arch else "torch, CUDA and Python"
    return found, f"{'a' if found else 'no'} build for this {environment}"


def hub_kernel_problem() -> str | None:
    """None when transformers can load the Hub's flash-attention kernel on this GPU now (from the cache when
    ``HF_HUB_OFFLINE=1``, else from the Hub), else why not."""
    from transformers.utils import is_kernels_available

    if not is_kernels_available():
        return "the kernels package transformers needs for it is not installed"
    repo, version = hub_kernel()
    found, reason = probe_hub_kernel(repo, version, check_arch=True)
    return None if found else reason


def root_cause(err: BaseException) -> str:
    """The first line of what ``err`` was raised from, at the bottom of its chain: kernels words a failed Hub request
    as its own refusal (a publisher it "could not verify"), which would hide that the Hub was not reached."""
    while err.__cause__ is not None:
        err = err.__cause__
    text = str(err).strip()
    return f"{type(err).__name__}: {text.splitlines()[0]}" if text else type(err).__name__


def from_source_asked(environ: Mapping[str, str]) -> bool:
    value = environ.get("FLASH_ATTN_FROM_SOURCE", "")
    if value not in ("", "0", "1"):
        raise InputError(f"FLASH_ATTN_FROM_SOURCE={value}: use 1 to compile flash-attn from source, or 0 (default)")
    return value == "1"


def source_archs(machine: Machine, environ: Mapping[str, str]) -> tuple[str, str]:
    """FLASH_ATTN_CUDA_ARCHS for a source build, and why: as given, else the visible GPUs' architectures."""
    allowed = ", ".join(SOURCE_ARCHS.values())
    given = environ.get("FLASH_ATTN_CUDA_ARCHS", "")
    if given:
        unknown = [arch for arch in given.split(";") if arch not in SOURCE_ARCHS.values()]
        if unknown:
            raise InputError(
                f"FLASH_ATTN_CUDA_ARCHS={given}: flash-attn {FLASH_ATTN_VERSION} compiles for {allowed} only (its "
                f"setup.py ignores {', '.join(unknown)}); a build runs on later GPUs of its major (80 on sm_86, sm_89)"
            )
        return given, "as FLASH_ATTN_CUDA_ARCHS says"
    if not machine.gpus:
        raise InputError(
            "FLASH_ATTN_FROM_SOURCE=1 with no GPU visible to take the architectures from: set FLASH_ATTN_CUDA_ARCHS "
            "(90 for H100/H200, 80 for A100, 100 for B200)"
        )
    unbuildable = [f"{name} ({sm(cap)})" for name, cap in machine.gpus if cap[0] not in SOURCE_ARCHS]
    if unbuildable:
        raise InputError(
            f"flash-attn {FLASH_ATTN_VERSION} has no build for {', '.join(unbuildable)}: its setup.py compiles for "
            f"{allowed} only"
        )
    archs = ";".join(sorted({SOURCE_ARCHS[capability[0]] for _, capability in machine.gpus}, key=int))
    return archs, "the visible GPUs' architectures, instead of flash-attn's default 80;90;100;120"


def max_jobs(machine: Machine, environ: Mapping[str, str]) -> tuple[int, str]:
    """MAX_JOBS for a source build, and why: as given, else flash-attn's own rule (one job per two cores and per 9 GiB
    of available memory, at least one)."""
    given = environ.get("MAX_JOBS", "")
    if given:
        if not given.isdigit() or int(given) < 1:
            raise InputError(f"MAX_JOBS={given}: give a whole number of parallel compiler jobs, 1 or more")
        return int(given), "as MAX_JOBS says"
    jobs = max(1, min(machine.cpus // 2, int(machine.available_gib // GIB_PER_JOB)))
    return jobs, (
        f"{machine.cpus} cores / 2 and {machine.available_gib:.0f} GiB available / {GIB_PER_JOB} GiB a job, "
        "flash-attn's setup.py rule"
    )


def decide(
    machine: Machine,
    *,
    from_source: bool,
    environ: Mapping[str, str],
    check_wheel: Callable[[str], tuple[bool | None, str]] = wheel_exists,
) -> Plan:
    """The path to flash-attention 2 for ``machine`` (see the module docstring); a source build it cannot start is an
    :class:`InputError` before anything is installed."""
    if machine.cuda is None:
        raise InputError(
            f"torch {machine.torch_version} is a CPU build, and flash-attention needs torch's CUDA build: "
            "reinstall torch from the CUDA wheels (make setup installs the pinned one)"
        )
    lines = [machine.describe()]
    if machine.gpus and all(capability < MIN_CAPABILITY for _, capability in machine.gpus):
        gpus = ", ".join(f"{name} ({sm(capability)})" for name, capability in machine.gpus)
        lines.append(
            f"decision: nothing to install: flash-attention 2 runs on sm_80 (Ampere) and newer, not on {gpus}; "
            "attention stays sdpa"
        )
        return Plan(NOTHING, lines)
    if from_source:
        return _plan_source(machine, environ, lines)
    name = wheel_name(
        torch_version=machine.torch_version,
        cuda=machine.cuda,
        cxx11_abi=machine.cxx11_abi,
        python=machine.python,
        machine=machine.machine,
    )
    url = wheel_url(name)
    exists, reason = check_wheel(url)
    if exists:
        lines.append(f"flash-attn wheel {name}: published ({reason})")
        lines.append(f"decision: install flash-attn {FLASH_ATTN_VERSION} from that wheel (downloaded, not built)")
        return Plan(WHEEL, lines, wheel_url=url)
    lines.append(f"flash-attn wheel {name}: {'not published' if exists is False else 'cannot tell'} ({reason})")
    repo, version = hub_kernel()
    lines.append(
        f"decision: the Hub's prebuilt flash-attention 2, {repo} v{version}, fetched into the Hugging Face cache "
        "(FLASH_ATTN_FROM_SOURCE=1 compiles flash-attn instead: hours)"
    )
    return Plan(HUB_KERNEL, lines)


def _plan_source(machine: Machine, environ: Mapping[str, str], lines: list[str]) -> Plan:
    wanted = f"CUDA {major(machine.cuda)}.x, the major torch {machine.torch_version} was built with"
    if machine.nvcc is None:
        raise InputError(
            f"FLASH_ATTN_FROM_SOURCE=1 needs nvcc of {wanted}, and none was found (CUDA_HOME, CUDA_PATH, PATH, "
            "/usr/local/cuda): install that CUDA toolkit and set CUDA_HOME to it"
        )
    if major(machine.nvcc) != major(machine.cuda):
        raise InputError(
            f"FLASH_ATTN_FROM_SOURCE=1: nvcc is CUDA {machine.nvcc} and torch's extension builder refuses another "
            f"CUDA major than torch's: set CUDA_HOME to a toolkit of {wanted}"
        )
    archs, archs_reason = source_archs(machine, environ)
    jobs, jobs_reason = max_jobs(machine, environ)
    lines += [
        f"nvcc: CUDA {machine.nvcc}, the same major as torch's CUDA {machine.cuda}",
        f"FLASH_ATTN_CUDA_ARCHS={archs}: {archs_reason}",
        f"MAX_JOBS={jobs}: {jobs_reason}",
        (
            f"decision: compile flash-attn {FLASH_ATTN_VERSION} from source, as FLASH_ATTN_FROM_SOURCE=1 asks (its 72 "
            "CUDA files per architecture: hours)"
        ),
    ]
    # FORCE_BUILD: the build was asked for, so flash-attn's setup skips its own wheel lookup.
    env = {"FLASH_ATTN_CUDA_ARCHS": archs, "MAX_JOBS": str(jobs), "FLASH_ATTENTION_FORCE_BUILD": "TRUE"}
    return Plan(SOURCE, lines, build_env=env)


def read_machine() -> Machine:
    """This machine's torch, Python, GPUs, nvcc (the one torch's extension builder finds), cores and memory."""
    import psutil
    import torch
    from torch.utils.cpp_extension import CUDA_HOME

    gpus = ()
    if torch.cuda.is_available():
        count = torch.cuda.device_count()
        gpus = tuple((torch.cuda.get_device_name(i), tuple(torch.cuda.get_device_capability(i))) for i in range(count))
    return Machine(
        torch_version=torch.__version__,
        cuda=torch.version.cuda,
        cxx11_abi=bool(torch._C._GLIBCXX_USE_CXX11_ABI),
        python=f"cp{sys.version_info.major}{sys.version_info.minor}",
        machine=platform.uname().machine,
        gpus=gpus,
        nvcc=nvcc_release(CUDA_HOME),
        cpus=len(os.sched_getaffinity(0)),
        available_gib=psutil.virtual_memory().available / 2**30,
    )


def nvcc_release(cuda_home: str | None) -> str | None:
    """The CUDA release of ``cuda_home``'s nvcc, read as torch's extension builder reads it; None if there is none."""
    nvcc = Path(cuda_home or "") / "bin" / "nvcc"
    if not cuda_home or not nvcc.is_file():
        return None
    output = subprocess.run([nvcc, "--version"], check=False, capture_output=True, text=True).stdout
    found = re.search(r"release (\d+[.]\d+)", output)
    return found.group(1) if found else None


def run_pip(arguments: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    command = [sys.executable, "-m", "pip", "install", *arguments]
    if subprocess.run(command, check=False, env={**os.environ, **(env or {})}).returncode != 0:
        raise UserError(f"`pip install {' '.join(arguments)}` failed (its output is above)")


def prefetch_hub_kernel(repo: str, version: int) -> Path:
    """Fetch the Hub kernel's build for this torch and CUDA into the Hugging Face cache and load it on this GPU
    (kernels checks the build's architectures against it), then find it again from the cache alone, as an
    ``HF_HUB_OFFLINE=1`` run will; the folder of the build."""
    from kernels import get_kernel, install_kernel

    try:
        get_kernel(repo, version=version)
        return install_kernel(repo, version=version, local_files_only=True)
    except Exception as err:  # no build for this torch, CUDA or GPU, no Hub, an untrusted publisher: re-raised
        raise UserError(
            f"no prebuilt flash-attention for this torch and CUDA: no flash-attn wheel was found, and {repo} "
            f"v{version} could not be fetched and loaded ({root_cause(err)}); attention stays sdpa, or "
            "FLASH_ATTN_FROM_SOURCE=1 make gpu_setup compiles flash-attn (hours)"
        ) from err


def check_import() -> str:
    """flash-attn's version as a fresh Python imports it (this process started before it was installed)."""
    result = subprocess.run(
        [sys.executable, "-c", "import flash_attn; print(flash_attn.__version__)"],
        check=False,
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        error = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit {result.returncode}"
        raise UserError(f"flash-attn was installed but does not import ({error})")
    return result.stdout.strip()


def set_up(*, dry_run: bool, keep: Sequence[str], environ: Mapping[str, str] = os.environ) -> int:
    """Decide, print each decision, and carry the plan out (``dry_run``: check what a CPU can, install nothing)."""
    machine = read_machine()
    if not dry_run and not machine.gpus:
        raise UserError(
            "no CUDA GPU is visible (torch.cuda.is_available() is False): make gpu_setup installs flash-attention "
            "for the GPU it runs on; run it there, or with DRY_RUN=1 to print its decision only"
        )
    plan = decide(machine, from_source=from_source_asked(environ), environ=environ, check_wheel=wheel_exists)
    for line in plan.lines:
        say(line)
    if plan.path == HUB_KERNEL:
        repo, version = hub_kernel()
        if dry_run:
            found, reason = probe_hub_kernel(repo, version, check_arch=bool(machine.gpus))
            if found is False:
                raise UserError(
                    f"{repo} v{version} has {reason}, and no flash-attn wheel was found: make gpu_setup would stop "
                    "here; FLASH_ATTN_FROM_SOURCE=1 compiles flash-attn (hours)"
                )
            say(f"dry run: {repo} v{version}: {reason if found else 'cannot tell: ' + reason}")
        else:
            build = prefetch_hub_kernel(repo, version)
            say(f"{repo} v{version} loads on this GPU, and from {build} with HF_HUB_OFFLINE=1")
    elif plan.path == WHEEL and not dry_run:
        # pip takes the wheel from its URL and never builds it (a failed download stops there). The file name's local
        # part (+cu13torch2.14cxx11abiTRUE) is not in the wheel's metadata, which pip allows for a URL.
        run_pip([plan.wheel_url, *keep])
        say(f"flash-attn {check_import()} imports")
    elif plan.path == SOURCE:
        if dry_run:
            run_pip(["-q", "--dry-run", "--no-build-isolation", FLASH_ATTN, *keep])
            say(f"dry run: pip resolves {FLASH_ATTN} (not built)")
        else:
            run_pip(["-q", *BUILD_TOOLS, *keep])
            run_pip(["--no-build-isolation", FLASH_ATTN, *keep], env=plan.build_env)
            say(f"flash-attn {check_import()} imports")
    return 0


def say(line: str) -> None:
    print(f"flash-attention: {line}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m recipes.model_io.attention", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dry-run", action="store_true", help="decide and check what a CPU can (the wheel, the Hub kernel's build)"
    )
    parser.add_argument(
        "--keep",
        nargs="*",
        default=[],
        metavar="REQUIREMENT",
        help="requirements every pip call repeats, so that pip never swaps them (the Makefile's torch pins)",
    )
    args = parser.parse_args(argv)
    return report_mistakes(lambda: set_up(dry_run=args.dry_run, keep=args.keep))


if __name__ == "__main__":
    raise SystemExit(main())
