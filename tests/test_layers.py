"""The layers run one way (docs/architecture.md): datasets below models, the command line above both.

Every import of every module is read from its syntax tree, including the imports inside functions (the project
imports heavy modules lazily), so a violation cannot hide behind a deferred import.
"""

import ast

import pytest
from conftest import REPO


PACKAGES = ("sureon", "builders", "public_converters", "recipes", "model_cards")

# (importer prefix, forbidden prefix, why)
RULES = [
    ("builders", "recipes", "the data layer never imports the model layer"),
    ("public_converters", "recipes", "the data layer never imports the model layer"),
    ("model_cards", "recipes", "card templates sit below both layers"),
    ("builders", "sureon", "the command line sits above the data layer"),
    ("public_converters", "sureon", "the command line sits above the data layer"),
    ("recipes", "sureon", "the command line sits above the model layer"),
    ("model_cards", "builders", "card templates sit below both layers"),
    ("public_converters", "builders.sureon", "the public corpus does not depend on another dataset's builder"),
    ("public_converters", "builders.surgiq", "the public corpus does not depend on another dataset's builder"),
    ("public_converters", "builders.pipeline", "the public corpus does not depend on another dataset's builder"),
    ("builders", "public_converters", "the Sureon and SurgiQ builders do not depend on the public corpus"),
    ("recipes.model_io", "recipes.training", "model input/output sits below training and evaluation"),
    ("recipes.model_io", "recipes.evaluation", "model input/output sits below training and evaluation"),
    ("recipes.model_io", "recipes.curation", "model input/output sits below training and evaluation"),
    ("recipes.model_io", "recipes.export", "model input/output sits below training and evaluation"),
    ("recipes.training", "recipes.evaluation", "training support code does not depend on evaluation"),
    ("recipes.evaluation", "recipes.training", "evaluation shares model input/output with training, not its code"),
    ("recipes.training", "recipes.curation", "training support code does not depend on curation"),
    ("recipes.evaluation", "recipes.curation", "evaluation does not depend on curation"),
    ("recipes.model_io", "recipes.sft", "support code never imports a launch script"),
    ("recipes.model_io", "recipes.grpo", "support code never imports a launch script"),
    ("recipes.training", "recipes.sft", "support code never imports a launch script"),
    ("recipes.evaluation", "recipes.sft", "support code never imports a launch script"),
    ("recipes.curation", "recipes.sft", "support code never imports a launch script"),
    ("recipes.training", "recipes.grpo", "support code never imports a launch script"),
    ("recipes.evaluation", "recipes.grpo", "support code never imports a launch script"),
    ("recipes.curation", "recipes.grpo", "support code never imports a launch script"),
]


def module_name(path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def dynamic_import_target(call: ast.Call) -> str | None:
    """``importlib.import_module("a.b")`` -> ``"a.b"`` (how the CLI mounts sub-command modules)."""
    name = getattr(call.func, "attr", getattr(call.func, "id", ""))
    if name == "import_module" and call.args and isinstance(call.args[0], ast.Constant):
        return call.args[0].value if isinstance(call.args[0].value, str) else None
    return None


def imported_modules(path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            raise AssertionError(f"{path}: relative import; the project uses absolute imports only")
        elif isinstance(node, ast.Call) and dynamic_import_target(node):
            names.add(dynamic_import_target(node))
    return names


def within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def project_modules():
    return sorted(path for package in PACKAGES for path in (REPO / package).rglob("*.py"))


def test_every_package_is_scanned():
    names = {module_name(path) for path in project_modules()}
    assert {"sureon.cli", "builders.sureon.build", "recipes.training.mixture", "public_converters.build"} <= names


@pytest.mark.parametrize("path", project_modules(), ids=lambda p: str(p.relative_to(REPO)))
def test_imports_follow_the_layers(path):
    importer = module_name(path)
    broken = [
        f"{importer} imports {name}: {why}"
        for name in sorted(imported_modules(path))
        for prefix, forbidden, why in RULES
        if within(importer, prefix) and within(name, forbidden)
    ]
    assert not broken, "\n".join(broken)


def test_the_rules_catch_a_violation(tmp_path):
    """The scanner finds a lazy import inside a function, and dynamic imports by name."""
    module = tmp_path / "bad.py"
    module.write_text(
        "import importlib\n\ndef f():\n    from recipes.evaluation.inference import make_backend\n"
        "    return importlib.import_module('sureon.cli')\n"
    )
    found = imported_modules(module)
    assert "recipes.evaluation.inference" in found and "sureon.cli" in found


def test_no_project_file_points_outside_the_repository():
    """The facts a reader relies on live in the project (docs/), not in notes a user of the repository lacks."""
    offenders = [
        str(path.relative_to(REPO))
        for folder in (*PACKAGES, "docs", "benchmarks", "sample_data", "accelerate_configs", ".ci")
        if (REPO / folder).exists()
        for path in (REPO / folder).rglob("*")
        if path.is_file()
        and path.suffix in (".py", ".md", ".yaml", ".json", ".txt", "")
        and "__pycache__" not in path.parts
        and ("shared/research" in path.read_text(errors="ignore") or "../shared" in path.read_text(errors="ignore"))
    ]
    for name in ("README.md", "Makefile", "pyproject.toml"):
        text = (REPO / name).read_text()
        if "shared/research" in text or "../shared" in text:
            offenders.append(name)
    assert not offenders


def import_graph() -> dict[str, set[str]]:
    """``{module: the project modules it imports}``, lazy imports included (a name imported from a module counts as
    that module)."""
    modules = {module_name(path): path for path in project_modules()}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in imported_modules(path):
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], 0
    for root, imported in graph.items():
        if root in index:
            continue
        work = [(root, iter(sorted(imported)))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_two_modules_import_each_other():
    """A circle hidden behind lazy imports (the recipe reader, the mixture and the scripts once were one) makes a
    change impossible to place: each module of it needs the others loaded first."""
    assert not cycles(import_graph())


def test_the_cycle_check_finds_a_circle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
