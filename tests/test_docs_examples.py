"""The Python examples of the manual run: each page's ```python blocks, in order, as one script."""
import re
from pathlib import Path

import pytest

from requires import missing_dot, require

DOCS = Path(__file__).resolve().parents[1] / "docs"
NEEDS_DOT = {"report.md"}     # its example renders the stage dumps
PAGES = ["gradients.md", "nn.md", "training.md", "checkpoints.md", "learning_rate.md", "mixed_compute.md",
         "model.md", "control_flow.md", "mindspore2.md", "mindspore_scripts.md", "primitives.md", "report.md",
         "distributed.md", "convolution.md", "shapes.md"]


@pytest.mark.grid
@pytest.mark.parametrize("page", PAGES)
def test_examples_run(page, capsys):
    if page in NEEDS_DOT:
        require(missing_dot())
    text = (DOCS / page).read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, f"docs/{page} has no python example"
    namespace = {"__name__": f"docs_{page.replace('.', '_')}"}
    for k, block in enumerate(blocks):
        exec(compile(block, f"docs/{page} block {k}", "exec"), namespace)   # noqa: S102 - our own docs
    printed = capsys.readouterr().out
    for comment in re.findall(r"print\(.*?\)\s+# (\[.*?\]|\d+|True|False)$", text, flags=re.M):
        assert comment in printed, f"docs/{page}: the example printed {printed!r}, the page says {comment}"
