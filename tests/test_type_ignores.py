"""Every `# type: ignore` in a product module or a test names its error code and says why
(issue 19: mypy runs on every product module and on the tests in the test command; an ignore
is an exception to explain)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = (
    "common", "monitoring", "ingest", "judging", "dashboard", "review", "investigations",
    "alarms", "jobs", "accounts", "traces", "treue_site", "treue_demo",
    "clients/python/treue_client",
)
CHECKED = (*PRODUCT, "tests")
THIS_FILE = Path(__file__).resolve()  # it names the comment it looks for
# "# type: ignore[code]" followed by "# why", on the same line.
EXPLAINED = re.compile(r"# type: ignore\[[a-z-]+(?:, *[a-z-]+)*\] +# +\S")


def test_every_type_ignore_has_a_code_and_a_reason() -> None:
    bare = []
    for package in CHECKED:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts or path == THIS_FILE:
                continue
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                if "type: ignore" in line and not EXPLAINED.search(line):
                    bare.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not bare, "\n".join(bare)
