"""The documents are level with the repository: every paper note and benchmark script is listed,
and every path a document names exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = sorted([*ROOT.glob("papers/*.md"), ROOT / "README.md", ROOT / "CONTRIBUTING.md",
                    ROOT / "benchmarks" / "README.md"])
#: A path inside the repository, as documents write one (placeholders such as NAME.py aside).
REPO_PATH = re.compile(r"\b(?:benchmarks|scripts|tests|mdtheory|notebooks|examples|papers)/[\w./-]*\w"
                       r"\.(?:py|sh|ipynb|md|json|jsonl|npy)\b")


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_a_document_names_exists(document):
    missing = sorted({m.group(0) for m in REPO_PATH.finditer(document.read_text())
                      if "NAME" not in m.group(0) and not (ROOT / m.group(0)).exists()})
    assert missing == []


def test_benchmarks_readme_lists_every_script_and_only_scripts_that_exist():
    text = (ROOT / "benchmarks" / "README.md").read_text()
    scripts = {p.name for p in (ROOT / "benchmarks").glob("*.py")}
    named = set(re.findall(r"`([\w-]+\.py)\b", text))
    assert sorted(scripts - named) == [] and sorted(named - scripts) == []


def test_papers_readme_links_every_note():
    text = (ROOT / "papers" / "README.md").read_text()
    notes = {p.name for p in (ROOT / "papers").iterdir() if p.suffix in (".md", ".jsonl")} - {"README.md"}
    linked = set(re.findall(r"\]\(([\w.-]+)\)", text))
    assert sorted(notes - linked) == [] and sorted(linked - notes) == []
