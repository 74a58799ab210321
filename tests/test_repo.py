"""The repository's promises: the README and docs/ name real targets, files and anchors, the sample data is current."""

import re
import tomllib

import pyarrow.parquet as pq
import pytest
from conftest import REPO, SAMPLE_RELEASE

from sample_data.make_sample_release import SCHEMA, release_rows


README = (REPO / "README.md").read_text()
MAKEFILE = (REPO / "Makefile").read_text()
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]  # what a user reads
DOCS = "\n".join(page.read_text() for page in PAGES)


def make_targets():
    return set(re.findall(r"^([a-z_]+):", MAKEFILE, flags=re.MULTILINE))


def test_readme_make_commands_exist():
    used = set(re.findall(r"`?make ([a-z_]+)", README))
    assert {"demo", "test"} <= used
    assert used <= make_targets(), used - make_targets()


def test_readme_is_a_landing_page():
    """What it is, the two commands, the tasks with their pages: the details live in docs/."""
    lines = README.splitlines()
    assert len(lines) <= 200 and max(map(len, lines)) <= 300
    assert "## Two commands" in README and "## Tasks" in README and "## Citation" in README


def test_docs_paths_exist():
    folders = r"(?:sureon|builders|public_converters|recipes|model_cards|sample_data|docs|benchmarks|tests"
    folders += r"|accelerate_configs|\.ci)"
    paths = set(re.findall(rf"`({folders}/[\w./-]*)`", DOCS))
    assert paths, "the README and docs/ name no repository paths"
    missing = [p for p in paths if not (REPO / p).exists() and not p.startswith("sample_data/sureon_release/")]
    assert not missing


def layout_rows(text: str) -> list[tuple[str, str]]:
    """``| `path` | holds |`` rows of a layout table."""
    return re.findall(r"^\| `([^`]+)` \| (.+) \|$", text, flags=re.MULTILINE)


def named_paths(folder: str, holds: str) -> list[str]:
    """Repository paths a layout row names: the row's own, paths with a slash, and file names inside its folder."""
    paths = [] if "<" in folder else [folder]
    inside = folder.split("<")[0].rstrip("/")
    for token in re.findall(r"`([^`\s]+)`", holds):
        if "<" in token:
            continue
        if "/" in token and (REPO / token).exists():
            paths.append(token)
        elif token.endswith(("/", ".py", ".md", ".json")):
            paths.append(f"{inside}/{token}")
    return paths


def test_readme_layout_table_names_only_existing_paths():
    layout = README.split("## Layout")[1].split("\n## ")[0]
    rows = layout_rows(layout)
    assert {folder for folder, _ in rows} >= {"sureon/", "builders/", "public_converters/", "recipes/", "docs/"}
    missing = [path for folder, holds in rows for path in named_paths(folder, holds) if not (REPO / path).exists()]
    assert not missing
    assert "docs/architecture.md" in README and "docs/sources/" in README


def test_architecture_map_matches_the_tree():
    """Every path the map names exists, and every package of the project is on the map."""
    architecture = (REPO / "docs" / "architecture.md").read_text()
    rows = layout_rows(architecture)
    missing = [path for folder, holds in rows for path in named_paths(folder, holds) if not (REPO / path).exists()]
    assert not missing
    packages = sorted(
        str(init.parent.relative_to(REPO)) + "/"
        for top in ("sureon", "builders", "public_converters", "recipes")
        for init in (REPO / top).rglob("__init__.py")
    )
    mapped = {folder for folder, _ in rows}
    off_map = [package for package in packages if package not in mapped and f"`{package}`" not in architecture]
    assert not off_map, f"packages missing from docs/architecture.md: {off_map}"
    modules = sorted(
        path
        for top in ("sureon", "builders", "recipes")
        for path in (REPO / top).rglob("*.py")
        if path.name != "__init__.py" and path.name != "__main__.py"
    )
    unnamed = [
        str(path.relative_to(REPO))
        for path in modules
        if f"`{path.name}`" not in architecture and str(path.relative_to(REPO)) not in architecture
    ]
    assert not unnamed, f"modules docs/architecture.md does not name: {unnamed}"


def test_docs_launch_commands_point_at_existing_files():
    commands = re.findall(r"(?:accelerate launch|python)[^\n]*(?:\\\n[^\n]*)*", DOCS)
    named = [path for command in commands for path in re.findall(r"(?:--config_file|--config)\s+([^\s`]+)", command)]
    scripts = [path for command in commands for path in re.findall(r"\s(recipes/\w+\.py)", command)]
    assert "accelerate_configs/zero3.yaml" in named and "recipes/sft.py" in scripts
    missing = [path for path in named + scripts if not (REPO / path).is_file() and path != "RECIPE.yaml"]
    assert not missing


def test_demo_target_runs_the_builder_on_the_bundled_sample():
    demo = MAKEFILE.split("\ndemo:")[1].split("\n\n")[0]
    assert "sample_data/make_videos.py" in demo and "sureon build sureon" in demo
    assert "--release sample_data/sureon_release" in demo


def test_ci_runs_the_readme_test_command():
    assert "make test" in (REPO / ".ci" / "run").read_text()


def test_console_script_and_packages():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["sureon"] == "sureon.cli:main"
    extras = set(project["optional-dependencies"])
    assert {"gpu", "dev"} <= extras
    # vLLM pins its own torch and transformers: an extra would downgrade this environment (it lives in its own venv)
    assert "vllm" not in extras
    assert not any(
        "vllm" in requirement for values in project["optional-dependencies"].values() for requirement in values
    )


@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_committed_sample_release_matches_its_generator(split):
    table = pq.read_table(SAMPLE_RELEASE / "data" / f"{split}-00000-of-00001.parquet")
    assert table.schema.equals(SCHEMA)
    assert table.to_pylist() == release_rows()[split]


def test_the_public_corpus_page_lists_every_source_as_the_code_declares_it():
    from public_converters.spec import registry, sources_markdown

    assert len(registry()) == 22
    page = (REPO / "docs" / "datasets" / "public_corpus.md").read_text()
    assert sources_markdown() in page, "regenerate the table with: python -m public_converters.spec"


def heading_anchors(text: str) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens, repeats
    numbered."""
    anchors: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"```.*?```", "", text, flags=re.DOTALL), flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchor, number = slug, 0
        while anchor in anchors:
            number += 1
            anchor = f"{slug}-{number}"
        anchors.add(anchor)
    return anchors


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for page in PAGES:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif anchor and file.suffix == ".md" and anchor not in heading_anchors(file.read_text()):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_every_public_source_has_its_provenance_page():
    """What each reader relies on, with the upstream source of each fact, is findable inside the project."""
    from public_converters.spec import registry

    index = (REPO / "docs" / "sources" / "README.md").read_text()
    for name in registry():
        row = re.search(rf"^\| `{name}` \| \[(\w+\.md)\]", index, flags=re.MULTILINE)
        assert row, f"docs/sources/README.md has no row for {name}"
        page = (REPO / "docs" / "sources" / row.group(1)).read_text()
        assert "## " in page and "Reader:" in page, f"{row.group(1)} names no reader"


# "seed" where a paper is meant ("seed Fig. 17", "Seed D.1", "the seed paper"), not a random seed ("seed 7").
PAPER_CALLED_SEED = re.compile(
    r"\bseed(?:'s)? (?:[A-Z]\.\d|fig|table|tab\.|§|section|sec\.|appendix|eq\.|algorithm|paper|stage \d)",
    re.IGNORECASE,
)


def test_the_papers_are_called_papers():
    """Users have the repository and the papers: "the Sureon paper" / "the SurgiQ paper", never "the seed"."""
    paths = [REPO / "README.md", REPO / "Makefile"]
    folders = ("sureon", "builders", "public_converters", "recipes", "docs", "model_cards", "benchmarks")
    for folder in (*folders, "sample_data"):
        paths += [p for p in (REPO / folder).rglob("*") if p.suffix in {".py", ".md", ".yaml", ".yml", ".jinja"}]
    found = [
        f"{path.relative_to(REPO)}:{number}: {line.strip()}"
        for path in paths
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if PAPER_CALLED_SEED.search(line)
    ]
    assert not found, "\n".join(found)


def bibtex_fields(entry: str) -> dict[str, str]:
    """``{field: value}`` of one BibTeX entry whose values are braced (over one or several lines), whitespace
    collapsed and the one LaTeX accent the Sureon paper's authors need decoded."""
    found = re.findall(r"^\s*(\w+)\s*=\s*\{(.*?)\},?\s*$", entry, flags=re.MULTILINE | re.DOTALL)
    return {name.lower(): " ".join(value.replace('{\\"e}', "ë").split()) for name, value in found}


def test_one_citation_in_the_readme_the_cards_and_citation_cff():
    """The README's BibTeX is the entry every pushed card carries (``model_cards.SUREON_CITATION``), and
    CITATION.cff's preferred-citation names the same authors in the same order, the same title, venue, year and
    arXiv record: a correction made in one place and not the others fails here."""
    import yaml

    from model_cards import SUREON_CITATION

    readme = re.search(r"## Citation\s+```bibtex\n(.*?)\n```", README, flags=re.DOTALL)
    assert readme and readme.group(1) == SUREON_CITATION
    bibtex = bibtex_fields(SUREON_CITATION)
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["title"] and cff["authors"]
    paper = cff["preferred-citation"]
    authors = [tuple(name.split(", ", 1)) for name in bibtex["author"].split(" and ")]
    assert authors == [(author["family-names"], author["given-names"]) for author in paper["authors"]]
    assert len(authors) == 12  # the arXiv record's author list, none dropped
    assert SUREON_CITATION.startswith("@inproceedings{") and paper["type"] == "conference-paper"
    assert bibtex["title"] == paper["title"]
    assert bibtex["booktitle"] == paper["collection-title"] and paper["conference"]["name"] in bibtex["booktitle"]
    assert int(bibtex["year"]) == paper["year"]
    assert bibtex["archiveprefix"] == "arXiv"
    assert f"arXiv:{bibtex['eprint']}" in [identifier["value"] for identifier in paper["identifiers"]]
