"""docs/integrations.md is executed: each python block runs in a fresh namespace, and a
``print(...)  # TEXT`` comment promises that TEXT is printed (the README test's rule)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

PAGE = Path(__file__).resolve().parents[1] / "docs" / "integrations.md"
BLOCKS = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
NEEDS = {
    "integrations.verifiers": ("verifiers", "integrations-verifiers"),
    "integrations.trl": ("trl", "integrations-trl"),
}


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_the_pages_python_examples_run_and_print_what_they_promise(block):
    for module, (package, extra) in NEEDS.items():
        if module in block:
            pytest.importorskip(package, reason=f"needs the {extra} extra: pip install 'spiral-arena[{extra}]'")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, str(PAGE), "exec"), {})
    printed = out.getvalue()
    for promise in re.findall(r"^print\(.*\)\s+# (.+)$", block, re.M):
        assert promise.strip() in printed, f"promised {promise!r}, printed {printed!r}"
