"""The pins, pyproject.toml and the lock files agree, so every install gets the same packages.

requirements.txt and requirements-dev.txt pin what Treue uses directly; pyproject.toml repeats
those pins as the project's metadata; scripts/lock.sh compiles each requirements file into a
lock with every package and its hashes, which scripts/demo.sh, scripts/test.sh and CI install
with --require-hashes. A pin changed in one place and not the others fails here.
"""

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def _pins(name: str) -> dict[str, str]:
    """A requirements file's own pins (not those it includes), name -> version."""
    pins: dict[str, str] = {}
    for line in (ROOT / name).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        requirement = Requirement(line)
        specifiers = list(requirement.specifier)
        assert len(specifiers) == 1 and specifiers[0].operator == "==", (
            f"{name}: {line!r} is not pinned to one version (name==version)"
        )
        pins[canonicalize_name(requirement.name)] = specifiers[0].version
    return pins


def _requirement_strings(name: str) -> set[str]:
    return {
        str(Requirement(line))
        for raw in (ROOT / name).read_text().splitlines()
        if (line := raw.split("#", 1)[0].strip()) and not line.startswith("-")
    }


def _lock(name: str) -> dict[str, tuple[str, list[str], str]]:
    """A lock file's entries: name -> (version, hashes, the "via" annotation)."""
    entries: dict[str, tuple[str, list[str], str]] = {}
    # An entry: "name==version \" then "--hash=..." lines, then "# via ..." comment lines.
    pattern = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)((?: \\\n +--hash=\S+)*)\n"
                         r"((?: +#.*\n)*)", re.MULTILINE)
    text = (ROOT / name).read_text()
    for match in pattern.finditer(text):
        hashes = re.findall(r"--hash=(\S+)", match.group(3))
        entries[canonicalize_name(match.group(1))] = (match.group(2), hashes, match.group(4))
    listed = [line for line in text.splitlines() if re.match(r"^[A-Za-z0-9]", line)]
    assert len(listed) == len(entries), f"{name}: an entry the test cannot read"
    return entries


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_requirements_pin_every_package_to_one_version() -> None:
    runtime = _pins("requirements.txt")
    dev = _pins("requirements-dev.txt")
    assert runtime and dev
    assert not set(runtime) & set(dev), "a package pinned in both requirements files"
    assert "-r requirements.txt" in (ROOT / "requirements-dev.txt").read_text()


def test_pyproject_mirrors_the_requirements() -> None:
    project = _pyproject()
    assert project["project"]["name"] == "treue"
    assert project["project"]["requires-python"] == ">=3.11"
    dependencies = {str(Requirement(d)) for d in project["project"]["dependencies"]}
    assert dependencies == _requirement_strings("requirements.txt")
    dev = {str(Requirement(d)) for d in project["dependency-groups"]["dev"]}
    assert dev == _requirement_strings("requirements-dev.txt")


@pytest.mark.parametrize(
    ("lock", "sources"),
    [
        ("requirements.lock", ["requirements.txt"]),
        ("requirements-dev.lock", ["requirements.txt", "requirements-dev.txt"]),
    ],
)
def test_lock_holds_every_pin_with_hashes(lock: str, sources: list[str]) -> None:
    entries = _lock(lock)
    pins: dict[str, str] = {}
    for source in sources:
        pins.update(_pins(source))
    for name, version in pins.items():
        assert name in entries, f"{lock} lacks {name}: run bash scripts/lock.sh"
        assert entries[name][0] == version, (
            f"{lock} has {name}=={entries[name][0]}, the pin says {version}: "
            "run bash scripts/lock.sh"
        )
    for name, (_, hashes, _via) in entries.items():
        assert hashes, f"{lock}: {name} has no hash"
        assert all(h.startswith("sha256:") for h in hashes)
    # Whatever the lock says came from a requirements file must still be pinned there: a pin
    # removed without a new lock leaves the package in it.
    for name, (_, _, via) in entries.items():
        for source in re.findall(r"-r (\S+)", via):
            assert name in _pins(source), f"{lock}: {name} is no longer in {source}"


def test_the_dev_lock_installs_the_runtime_lock_unchanged() -> None:
    runtime = _lock("requirements.lock")
    dev = _lock("requirements-dev.lock")
    for name, (version, _, _) in runtime.items():
        assert name in dev and dev[name][0] == version, (
            f"{name}: {version} at run time, {dev.get(name, ('missing',))[0]} for the tests"
        )
