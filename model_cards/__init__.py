"""Card templates (Jinja, rendered with ``huggingface_hub``) for the datasets and models this project publishes."""

from pathlib import Path


TEMPLATES_DIR = Path(__file__).parent


def template_path(name: str) -> str:
    path = TEMPLATES_DIR / name
    if not path.is_file():
        raise FileNotFoundError(f"no card template {name!r} in {TEMPLATES_DIR}")
    return str(path)
