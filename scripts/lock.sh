#!/usr/bin/env bash
# Writes the lock files from the pins: requirements.lock from requirements.txt and
# requirements-dev.lock from requirements-dev.txt, every package (dependencies of dependencies
# too) at one version with the hashes of its files, so that `pip install --require-hashes`
# installs exactly the same set everywhere. Run it after changing a pin in requirements*.txt
# (and the same pin in pyproject.toml); tests/test_requirements.py checks that they agree.
#
# pip-tools runs in a throwaway venv of its own under var/, never in the project's .venv.
# The package index is whatever pip is configured with here; the lock names none, so an
# install uses the installing machine's index.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
tools=var/lock-venv
[ -x "$tools/bin/pip-compile" ] || {
  "$python" -m venv "$tools"
  "$tools/bin/python" -m pip install -q --disable-pip-version-check "pip-tools==7.7.0"
}

compile() {
  # --allow-unsafe: pin pip/setuptools too should anything depend on them, so --require-hashes
  # never meets an unhashed package. No index or find-links line lands in the lock.
  CUSTOM_COMPILE_COMMAND="bash scripts/lock.sh" "$tools/bin/pip-compile" -q \
    --generate-hashes --allow-unsafe --strip-extras --no-emit-index-url \
    --no-emit-find-links --no-emit-trusted-host --resolver=backtracking \
    --output-file "$2" "$1"
}
compile requirements.txt requirements.lock
compile requirements-dev.txt requirements-dev.lock
