#!/usr/bin/env bash
# Build, or reuse, a separate virtual environment with VLMEvalKit, for `make vlmevalkit_venv` and
# tests/test_export_vlmevalkit.py.
#
# Usage: tests/vlmevalkit_venv.sh [VENV_DIR]   (default build/vlmevalkit-venv; PYTHON picks the interpreter, default
# python3)
#
# VLMEvalKit is on PyPI as ms-vlmeval; 0.0.20 pulls some 170 packages (decord, opencv-python, an omegaconf
# pre-release, qwen-vl-utils, ...) that have no place in the project's environment, so it lives in one of its own:
# - torch and torchvision at the project's pins first, so that ms-vlmeval's unpinned torch requirement keeps them;
# - transformers at the release this was checked with (5.24.0: Qwen3-VL's classes, `AutoModelForImageTextToText`);
# - scipy, scikit-learn, statsmodels, krippendorff and pycocotools: what the exported datasets' scoring imports from
#   the project (its public-benchmark metrics, its reports); the project itself is used from the checkout (the
#   export's run_vlmevalkit.py puts it on sys.path), never installed here.
# A stamp file records these pins: a venv built with other pins is rebuilt, a current one is reused as it is.
set -euo pipefail

VENV=${1:-build/vlmevalkit-venv}
PYTHON=${PYTHON:-python3}
PINS="ms-vlmeval==0.0.20 torch==2.14.1 torchvision==0.29.1 transformers==5.24.0"
PROJECT_DEPS=("scipy>=1.13" "scikit-learn>=1.5" "statsmodels>=0.14" "krippendorff>=0.8,<1" "pycocotools>=2.0.8"
    "openpyxl>=3.1")
STAMP="$VENV/.sureon-vlmevalkit"

# shellcheck source=tests/side_venv.sh
source "$(dirname "$0")/side_venv.sh"
side_venv_begin VLMEvalKit
"${PIP[@]}" install -q torch==2.14.1 torchvision==0.29.1
# shellcheck disable=SC2086
"${PIP[@]}" install -q $PINS "${PROJECT_DEPS[@]}"
"$VENV/bin/python" -c "import vlmeval.run, vlmeval.dataset.image_base, vlmeval.vlm.qwen3_vl, qwen_vl_utils, openpyxl"
side_venv_end VLMEvalKit
