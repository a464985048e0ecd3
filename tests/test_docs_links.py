"""The README and the manual in docs/ link only to files that exist: every relative link of a Markdown
link, image or <img src> resolves from the page that holds it, and every docs page is listed in the
docs index."""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
LINK = re.compile(r"\]\(([^)\s]+)\)|<img[^>]*\bsrc=\"([^\"]+)\"")


def _relative_links(text: str) -> list[str]:
    text = re.sub(r"```.*?```", "", text, flags=re.S)         # code blocks hold no links
    links = [a or b for a, b in LINK.findall(text)]
    return [link for link in links if not re.match(r"[a-z]+:", link) and not link.startswith("#")]


def test_the_pattern_finds_links():
    text = "see [a](docs/a.md), ![c](x/c.png) and <img src=\"d.png\" width=3>, not [w](https://e.org)\n" \
           "```\n[in code](nowhere.md)\n```\n"
    assert _relative_links(text) == ["docs/a.md", "x/c.png", "d.png"]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page):
    links = _relative_links(page.read_text("utf-8"))
    missing = [link for link in links if not (page.parent / link.split("#")[0]).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing files: {missing}"


def test_readme_is_the_front_door():
    assert len((ROOT / "README.md").read_text("utf-8").splitlines()) < 200


def test_docs_index_lists_every_page():
    index = (ROOT / "docs" / "README.md").read_text("utf-8")
    listed = set(re.findall(r"\b(\w+\.md)\b", index))      # linked, or named while another branch writes it
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages <= listed, f"docs/README.md does not list {sorted(pages - listed)}"


def test_sources_cite_no_file_outside_the_repository():
    """A docstring or comment names the source of its figures inside the repository (bench/, docs/): a reader
    of a clone has nothing else (the working notes beside the repository, `../shared/`, are not in it)."""
    sources = [p for d in ("ir", "kernels", "graphkernel", "bench", "tests") for p in (ROOT / d).rglob("*")
               if p.suffix in (".py", ".sh")] + PAGES
    outside = re.compile(r"\.\./shared/|\bANCHORS\.md\b")
    cited = [f"{p.relative_to(ROOT)}:{n}" for p in sources if p != Path(__file__)
             for n, line in enumerate(p.read_text("utf-8").splitlines(), 1) if outside.search(line)]
    assert not cited, "cite a file of the repository instead: " + ", ".join(cited)
