# Every user-facing target sets itself up on a fresh machine: system FFmpeg libraries (for torchcodec),
# a virtual environment at .venv, the pinned torch/torchvision first, then this project.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
STAMP := $(VENV)/.installed
TORCH_PINS := torch==2.14.1 torchvision==0.29.1
DEMO_DIR := build/demo
SURGIQ_SAMPLE := sample_data/surgiq
CHECK_DIRS := sureon builders public_converters recipes model_cards tests benchmarks sample_data

.PHONY: setup system-deps demo test reproduce slow_test launch_test gpu_setup vllm_venv vlmevalkit_venv quality style bench clean

setup: $(STAMP)

system-deps:
	@if ! ldconfig -p 2>/dev/null | grep -q libavcodec; then \
		echo "Installing the system FFmpeg libraries (torchcodec needs them)"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq --no-install-recommends ffmpeg >/dev/null; \
	fi

$(STAMP): pyproject.toml | system-deps
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q $(TORCH_PINS)
	$(PIP) install -q -e ".[dev]" $(TORCH_PINS)
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) sample_data/make_videos.py --out $(DEMO_DIR)/videos
	$(VENV)/bin/sureon build sureon --release sample_data/sureon_release --videos $(DEMO_DIR)/videos \
		--out $(DEMO_DIR)/sureon --on-missing-video skip --cache-dir $(DEMO_DIR)/cache --overwrite
	$(PY) -m public_converters.samples --out $(DEMO_DIR)/public_sources
	$(VENV)/bin/sureon build public --source-root $(DEMO_DIR)/public_sources --out $(DEMO_DIR)/public \
		--cache-dir $(DEMO_DIR)/cache/public --min-clip-seconds 4 --max-clip-seconds 12 --grid-fps 2 --overwrite
	$(PY) -m recipes.training.tiny_models --out $(DEMO_DIR)/tiny-qwen3-vl
	rm -rf $(DEMO_DIR)/sft-smoke
	$(PY) recipes/sft.py --config recipes/tiny/sft/config_smoke.yaml
	$(VENV)/bin/sureon world --out $(DEMO_DIR)/world --config recipes/tiny/world/demo.yaml
	$(VENV)/bin/sureon build sureon --release $(DEMO_DIR)/world/release --videos $(DEMO_DIR)/world/videos \
		--out $(DEMO_DIR)/world-build --configs bench train_all --max-frames 4 --min-frames 4 --no-blur \
		--cache-dir $(DEMO_DIR)/cache --overwrite
	$(PY) -m recipes.training.tiny_models --out $(DEMO_DIR)/tiny-world-vlm --corpus $(DEMO_DIR)/world/corpus.txt
	rm -rf $(DEMO_DIR)/sft-world $(DEMO_DIR)/grpo-world $(DEMO_DIR)/eval $(DEMO_DIR)/grpo_eval
	OMP_NUM_THREADS=1 $(PY) recipes/sft.py --config recipes/tiny/sft/config_world.yaml
	OMP_NUM_THREADS=1 $(PY) recipes/grpo.py --config recipes/tiny/grpo/config_world.yaml
	$(VENV)/bin/sureon eval sureon --model $(DEMO_DIR)/sft-world --dataset $(DEMO_DIR)/world-build --mode both \
		--out $(DEMO_DIR)/eval --max-new-tokens 16
	$(VENV)/bin/sureon eval sureon --model $(DEMO_DIR)/grpo-world --dataset $(DEMO_DIR)/world-build --mode both \
		--out $(DEMO_DIR)/grpo_eval --max-new-tokens 16
	$(VENV)/bin/sureon report sureon sft=$(DEMO_DIR)/eval/predictions.jsonl grpo=$(DEMO_DIR)/grpo_eval/predictions.jsonl \
		--out $(DEMO_DIR)/report --overwrite
	$(VENV)/bin/sureon eval public --model $(DEMO_DIR)/sft-smoke --dataset $(DEMO_DIR)/public \
		--benchmark bench-cholec80-phase-frame bench-cholec80-phase-clip --out $(DEMO_DIR)/public_eval --max-new-tokens 16
	$(VENV)/bin/sureon report public $(DEMO_DIR)/public_eval/predictions.jsonl --out $(DEMO_DIR)/public_report \
		--overwrite
	$(VENV)/bin/sureon near-duplicates surgiq --source $(SURGIQ_SAMPLE)/surgiq_sample.jsonl \
		--against $(SURGIQ_SAMPLE)/external_sample.jsonl --out $(DEMO_DIR)/surgiq_near_duplicates
	$(VENV)/bin/sureon build surgiq --source $(SURGIQ_SAMPLE)/surgiq_sample.jsonl \
		--exclude-ids $(DEMO_DIR)/surgiq_near_duplicates/dedupe_ids.txt --out $(DEMO_DIR)/surgiq --overwrite
	$(PY) -m recipes.training.tiny_models --kind causal-lm --out $(DEMO_DIR)/tiny-causal-lm
	for config in default shuffled; do \
		$(VENV)/bin/sureon eval surgiq --model $(DEMO_DIR)/tiny-causal-lm --dataset $(DEMO_DIR)/surgiq \
			--config $$config --out $(DEMO_DIR)/surgiq_runs/tiny-$$config || exit 1; \
	done
	$(VENV)/bin/sureon report surgiq $(DEMO_DIR)/surgiq_runs/tiny-default $(DEMO_DIR)/surgiq_runs/tiny-shuffled \
		--out $(DEMO_DIR)/surgiq_tables
	$(VENV)/bin/sureon shortcuts surgiq --dataset $(DEMO_DIR)/surgiq --out $(DEMO_DIR)/surgiq_shortcuts
	$(VENV)/bin/sureon audit --dataset $(DEMO_DIR)/surgiq --config default --split test \
		--guesser model=$(DEMO_DIR)/tiny-causal-lm,name=tiny --out $(DEMO_DIR)/surgiq_audit --overwrite
	$(VENV)/bin/sureon audit --dataset $(DEMO_DIR)/sureon --config validation --split validation \
		--guesser model=$(DEMO_DIR)/sft-smoke,name=sft-smoke --out $(DEMO_DIR)/sureon_audit --overwrite
	$(VENV)/bin/sureon curate --dataset $(DEMO_DIR)/sureon --config validation --split validation \
		--guesser model=$(DEMO_DIR)/sft-smoke,name=sft-smoke --harden-guesser model=$(DEMO_DIR)/tiny-causal-lm \
		--out $(DEMO_DIR)/validation_curated --overwrite
	rm -f $(DEMO_DIR)/review.sqlite $(DEMO_DIR)/review.sqlite-wal $(DEMO_DIR)/review.sqlite-shm
	echo "demo-password" | $(VENV)/bin/sureon review add-user demo --db $(DEMO_DIR)/review.sqlite
	$(VENV)/bin/sureon review assign --db $(DEMO_DIR)/review.sqlite --dataset $(DEMO_DIR)/sureon
	@echo ""
	@echo "make demo built, under $(DEMO_DIR)/ (the README's table says more):"
	@echo "  sureon/                 the Sureon configs: datasets.load_dataset(\"$(DEMO_DIR)/sureon\", \"bench\"); build_manifest.json"
	@echo "  public/                 the public corpus of the 22 sample sources (manifest.json, README.md card)"
	@echo "  report/report.md        a tiny model that learned: SFT then GRPO, visual far above chance, blind at it"
	@$(PY) -c "import json; from recipes.evaluation.sureon.report_rendering import headline; print(headline(json.load(open('$(DEMO_DIR)/report/report.json'))))" | sed 's/^/                            /'
	@echo "  public_report/          Table 5 of the Sureon paper for the smoke model on Cholec80"
	@echo "  surgiq_tables/          SurgiQ scored and tabulated (the SurgiQ paper's Tables 4-6)"
	@echo "  validation_curated/     stage 3: blind-test curation (and surgiq_audit/, sureon_audit/)"
	@echo "Expert review app, stage 4 (log in as demo / demo-password):"
	@echo "  $(VENV)/bin/sureon review serve --dataset $(DEMO_DIR)/sureon --db $(DEMO_DIR)/review.sqlite --videos $(DEMO_DIR)/videos"

# One pytest-xdist worker per core, at most four (each holds a torch stack in memory); `TEST_WORKERS=0` runs in one
# process. Each test file stays on one worker (module fixtures are built once), the costliest first by the CPU seconds
# in tests/file_cpu_seconds.json (tests/conftest.py; xdist's own reordering is off); conftest.py also shares the
# session fixtures between workers, gives each worker its share of the cores, and lists the slowest tests and files.
TEST_WORKERS ?= $(shell n=$$(nproc); echo $$(( n > 4 ? 4 : n > 1 ? n : 0 )))

test: $(STAMP)
	$(PY) -m pytest -m "not slow and not gpu and not network" -q -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# The construction method end to end in miniature (sureon/reproduce.py): the Sureon paper's Table 4 with its three
# arms (stage-1 distractors, stage 2's RADG through `sureon pipeline stage2`, blind-test curation) over three training
# seeds, and the report (build/reproduce/report/report.md). Resumable: a finished step is skipped.
reproduce: $(STAMP)
	HF_HUB_OFFLINE=1 $(VENV)/bin/sureon reproduce --out build/reproduce

slow_test: $(STAMP)
	$(PY) -m pytest -m "slow" -q

# The README's launch lines with the real accelerate configs on two CPU ranks (DeepSpeed's CPU accelerator, gloo):
# ZeRO-3, ZeRO-2 and FSDP2 through recipes/sft.py and recipes/grpo.py (about 4 minutes on two cores; CI runs it).
launch_test: $(STAMP)
	$(PY) -m pytest -m slow -q -p no:xdist tests/test_launch_configs.py

# The GPU extras on a CUDA machine, one command: DeepSpeed and Liger with the project (the `gpu` extra), then
# flash-attention 2 in minutes, as recipes/model_io/attention.py decides and says, one line per decision: flash-attn's
# prebuilt wheel where its release has one for this torch, CUDA, C++ ABI and Python (none for torch 2.11 and later),
# else the same kernels prebuilt on the Hub (kernels-community/flash-attn2, fetched into the Hugging Face cache, where
# runs with HF_HUB_OFFLINE=1 load them). It compiles flash-attn only with FLASH_ATTN_FROM_SOURCE=1 (hours), for the
# visible GPUs' architectures (FLASH_ATTN_CUDA_ARCHS to choose), MAX_JOBS from the cores and memory unless set, once
# nvcc's CUDA major matches torch's. DRY_RUN=1 decides and checks what a CPU can, installing no flash-attention: what
# CI runs on a machine without CUDA.
DRY_RUN ?=

gpu_setup: $(STAMP)
	$(PIP) install -q -e ".[gpu]" $(TORCH_PINS)
	$(PY) -c "import deepspeed, liger_kernel; print('deepspeed', deepspeed.__version__, '/ liger-kernel: installed')"
	$(PY) -m recipes.model_io.attention $(if $(filter 1,$(DRY_RUN)),--dry-run) --keep $(TORCH_PINS)

# vLLM for CPUs in an environment of its own (never in .venv: vLLM pins its own torch and transformers); built once,
# reused while its pins are current. tests/test_vllm.py builds it too.
vllm_venv:
	PYTHON=$(PYTHON) bash tests/vllm_venv.sh build/vllm-venv

# VLMEvalKit (PyPI: ms-vlmeval) in an environment of its own (it pulls ~170 packages, decord, opencv-python and an
# omegaconf pre-release among them); built once, reused while its pins are current. tests/test_export_vlmevalkit.py
# builds it too. Run an export with it: build/vlmevalkit-venv/bin/python EXPORT/run_vlmevalkit.py ...
vlmevalkit_venv:
	PYTHON=$(PYTHON) bash tests/vlmevalkit_venv.sh build/vlmevalkit-venv

quality: $(STAMP)
	$(VENV)/bin/ruff check $(CHECK_DIRS)
	$(VENV)/bin/ruff format --check $(CHECK_DIRS)

style: $(STAMP)
	$(VENV)/bin/ruff check --fix $(CHECK_DIRS)
	$(VENV)/bin/ruff format $(CHECK_DIRS)

bench: $(STAMP)
	$(PY) benchmarks/frames.py
	$(PY) benchmarks/llm_client.py
	$(PY) benchmarks/surgiq_scoring.py
	$(PY) benchmarks/sft_collator.py
	$(PY) benchmarks/cpu_lm_head.py
	$(PY) benchmarks/grpo_generation.py
	$(PY) benchmarks/radg.py
	$(PY) benchmarks/blind_scoring.py
	$(PY) benchmarks/review_store.py
	$(PY) benchmarks/public_corpus.py
	$(PY) benchmarks/videos_fetch.py
	$(PY) benchmarks/blur.py
	$(PY) benchmarks/public_eval.py
	$(PY) benchmarks/gpu_grpo.py

clean:
	rm -rf build .pytest_cache .ruff_cache
