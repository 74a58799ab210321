"""Card templates (Jinja, rendered with ``huggingface_hub``) for the datasets and models this project publishes."""

from pathlib import Path


TEMPLATES_DIR = Path(__file__).parent


def template_path(name: str) -> str:
    path = TEMPLATES_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"no card template {name!r} in {TEMPLATES_DIR}")
    return str(path)


# The Sureon paper (WACV 2027, arXiv:2603.06570) as every card pushed cites it: the same entry as the README's and
# CITATION.cff's preferred-citation (tests/test_repo.py checks the three agree).
SUREON_CITATION = r"""@inproceedings{perez2027sureon,
  title         = {Sureon: A Benchmark and Vision-Language Model for Surgical Reasoning},
  author        = {Perez, Alejandra and Rau, Anita and Mlambo, Busisiwe and White, Lee and Brunet, Aina and
                   Verde, Juan and Caicedo, Juan and Lavanchy, Jo{\"e}l L. and Schmidt, Adam and Nwoye, Chinedu and
                   Mohareri, Omid and Jamal, Muhammad Abdullah},
  booktitle     = {Proceedings of the IEEE/CVF Winter Conference on Applications of Computer Vision (WACV)},
  year          = {2027},
  eprint        = {2603.06570},
  archivePrefix = {arXiv}
}"""
