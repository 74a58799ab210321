"""Card templates (Jinja, rendered with ``huggingface_hub``) for the datasets and models this project publishes."""

from pathlib import Path


TEMPLATES_DIR = Path(__file__).parent


def template_path(name: str) -> str:
    path = TEMPLATES_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"no card template {name!r} in {TEMPLATES_DIR}")
    return str(path)


SUREON_CITATION = """@inproceedings{perez2027sureon,
  title     = {SUREON: A Benchmark and Vision-Language Model for Surgical Reasoning},
  author    = {Perez and Rau and White and Mlambo and Nwoye and Jamal and Mohareri},
  booktitle = {IEEE/CVF Winter Conference on Applications of Computer Vision (WACV)},
  year      = {2027},
  eprint    = {2603.06570},
  archivePrefix = {arXiv}
}"""
