"""README's examples are real code: every Python block in it stands word for word in the repo."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = [
    ROOT / "samples/traffic_fine/messages.py",
    ROOT / "samples/traffic_fine/workflow.py",
    ROOT / "tests/samples/test_traffic_fine.py",
    ROOT / "samples/traffic_fine/app.py",
    ROOT / "samples/quotes/caller.py",
]


def test_every_python_block_of_the_example_is_copied_from_code_that_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    assert len(blocks) >= 6
    code = "\n".join(path.read_text() for path in SOURCES)
    for block in blocks:
        for part in block.split("\n\n\n"):
            assert part.strip() in code, f"README block is not in the sources:\n{part}"
