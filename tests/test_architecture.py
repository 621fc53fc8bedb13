"""Rules of the map that import-linter (pyproject.toml) cannot state: a package's __init__ hands
no names on (but an app's declared public module), no module imports another's private name,
and no file grows past 500 lines."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("common", "monitoring", "ingest", "judging", "dashboard", "review", "investigations",
            "traces", "accounts", "alarms", "jobs", "treue_demo", "treue_site")
# Declared public modules: Django's convention that an app's models are importable from
# `<app>.models`, and the settings' one name for the whole configuration.
PUBLIC_INITS = {"monitoring/models/__init__.py", "treue_site/settings/__init__.py"}
MAX_LINES = 500


def product_files() -> list[Path]:
    return sorted(
        path for package in PACKAGES for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts
    )


def ours(module: str | None) -> bool:
    return module is not None and module.split(".")[0] in PACKAGES


def imports_in(path: Path) -> list[ast.ImportFrom]:
    return [node for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ImportFrom) and node.level == 0 and ours(node.module)]


def test_the_tree_is_there() -> None:
    files = product_files()
    assert len(files) > 200
    assert ROOT / "monitoring" / "models" / "__init__.py" in files


@pytest.mark.parametrize(
    "path", [p for p in product_files() if p.name == "__init__.py"],
    ids=lambda p: str(p.relative_to(ROOT)),
)
def test_a_package_init_hands_no_names_on(path: Path) -> None:
    if str(path.relative_to(ROOT)) in PUBLIC_INITS:
        return
    assert imports_in(path) == []


@pytest.mark.parametrize("path", product_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_crosses_a_module(path: Path) -> None:
    private = [
        f"{node.module}.{alias.name}" for node in imports_in(path) for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]
    assert private == []


# The Python client, published on its own, is held to the same length.
CLIENT_FILES = sorted((ROOT / "clients" / "python" / "treue_client").rglob("*.py"))


@pytest.mark.parametrize(
    "path", product_files() + CLIENT_FILES, ids=lambda p: str(p.relative_to(ROOT))
)
def test_no_file_is_past_500_lines(path: Path) -> None:
    assert len(path.read_text(encoding="utf-8").splitlines()) <= MAX_LINES


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ("from monitoring.models import _validate", ["monitoring.models._validate"]),
        ("from review.selectors import User, _hidden", ["review.selectors._hidden"]),
        ("from django.db import _private", []),
        ("from monitoring.models import __all__", []),
    ],
)
def test_the_private_name_check_sees_them(tmp_path: Path, source: str, names: list[str]) -> None:
    module = tmp_path / "m.py"
    module.write_text(source)
    found = [f"{n.module}.{a.name}" for n in imports_in(module) for a in n.names
             if a.name.startswith("_") and not a.name.startswith("__")]
    assert found == names
