"""Citations in the repository resolve inside it.

Docstrings and comments cite ``docs/protocol.md §N`` (or a bare ``§N``, which
means the same document). These tests fail when a ``.py`` or ``.md`` file
points at a document outside the repository (the old out-of-tree
``PROTOCOL.md``, ``../shared/...``), names a Markdown file the repository
lacks, or cites a section ``docs/protocol.md`` does not have. This file is
the one exception: its examples are the forbidden forms.

The conformance runner may read River's upstream goldens from a configured
path outside the tree, so files under ``conformance/`` may name a
``river-upstream`` path; nothing else may.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL_DOC = ROOT / "docs" / "protocol.md"

OUTSIDE_RE = re.compile(
    r"\bPROTOCOL(?:\.md)?\b"  # the out-of-tree spec, with or without its extension
    r"|(?:\.\./)+shared\b[^\s'\"`)]*"  # a relative path climbing out of the tree
    r"|/work/shared\b[^\s'\"`)]*"  # the absolute path of the shared folder
)
UPSTREAM_ALLOWED_UNDER = ("conformance/",)
UPSTREAM_NAME = "river-upstream"

# A section citation; "RFC 7396 §3" and the like cite someone else's sections.
CITATION_RE = re.compile(r"(?<!RFC \d{4} )§(\d+(?:\.\d+)*)")
HEADING_RE = re.compile(r"^#{2,6}\s+(\d+(?:\.\d+)*)\.?\s", re.MULTILINE)
MD_NAME_RE = re.compile(r"(?<![\w./:-])((?:\.{0,2}/)?[\w./-]*\w\.md)\b")

SKIP_DIRS = {"__pycache__", "node_modules", "build", "dist"}


def _is_skipped(path: Path) -> bool:
    for part in path.relative_to(ROOT).parts[:-1]:
        if part.startswith(".") or part in SKIP_DIRS or part.endswith(".egg-info"):
            return True
    # A virtualenv inside the tree is not the project's text.
    return any((parent / "pyvenv.cfg").exists() for parent in path.parents if ROOT in parent.parents)


def repo_text_files() -> list[Path]:
    """Every ``.py`` and ``.md`` file of the project, this one excepted."""
    me = Path(__file__).resolve()
    files = [
        p for ext in ("*.py", "*.md") for p in ROOT.rglob(ext)
        if p.is_file() and p.resolve() != me and not _is_skipped(p)
    ]
    return sorted(files)


def outside_references(text: str, relpath: str) -> list[str]:
    """The references in ``text`` (from file ``relpath``) to documents or paths outside the repo."""
    found = []
    for match in OUTSIDE_RE.finditer(text):
        ref = match.group(0)
        if UPSTREAM_NAME in ref and relpath.startswith(UPSTREAM_ALLOWED_UNDER):
            continue
        found.append(ref)
    return found


def missing_markdown(text: str, citing: Path) -> list[str]:
    """``.md`` names in ``text`` that exist neither beside ``citing`` nor from the repo root."""
    missing = []
    for name in MD_NAME_RE.findall(text):
        candidates = [(citing.parent / name).resolve(), (ROOT / name.lstrip("/")).resolve()]
        if not any(c.is_file() and (c == ROOT or ROOT in c.parents) for c in candidates):
            missing.append(name)
    return missing


def protocol_sections(doc: str) -> set[str]:
    """The section numbers ``doc`` defines as headings (``## 5. Insert`` -> ``5``)."""
    return set(HEADING_RE.findall(doc))


def cited_sections(text: str) -> list[str]:
    return CITATION_RE.findall(text)


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# ---------------------------------------------------------------- the scanners themselves


def test_outside_references_flag_the_old_spec_and_shared_paths() -> None:
    text = "see PROTOCOL.md §7.5; fixtures in ../../shared/conformance and /work/shared/STYLE.md"
    assert outside_references(text, "river_protocol/x.py") == [
        "PROTOCOL.md",
        "../../shared/conformance",
        "/work/shared/STYLE.md",
    ]
    assert outside_references("(PROTOCOL §2.5 steps 3-5)", "river_protocol/x.py") == ["PROTOCOL"]
    assert outside_references("cites docs/protocol.md §7.5 and PROTOCOL_VERSION", "x.py") == []


def test_river_upstream_path_is_allowed_only_under_conformance() -> None:
    text = 'UPSTREAM = "../shared/river-upstream/goldens"'
    assert outside_references(text, "conformance/runner.py") == []
    assert outside_references(text, "river_sync/client.py") == ["../shared/river-upstream/goldens"]
    # Even under conformance/, the old spec stays forbidden.
    assert outside_references("PROTOCOL.md §3", "conformance/runner.py") == ["PROTOCOL.md"]


def test_cited_sections_reads_bare_qualified_and_ranged_citations() -> None:
    text = "docs/protocol.md §5-§14; (§6.2-§6.4, §12.3) §7.1 steps 6-7. §1. RFC 7396 §2"
    assert cited_sections(text) == ["5", "14", "6.2", "6.4", "12.3", "7.1", "1"]


def test_protocol_sections_reads_numbered_headings_only() -> None:
    doc = "# Title\n\n## 0. Contents\n1. Constants\n## 1. Constants\n### 1.1 Sub\n#### 1.1.2 Deep\n"
    assert protocol_sections(doc) == {"0", "1", "1.1", "1.1.2"}


def test_missing_markdown_resolves_beside_the_file_and_from_the_root() -> None:
    citing = ROOT / "docs" / "guides" / "go-river.md"
    assert missing_markdown("see trio.md, ../protocol.md and docs/protocol.md", citing) == []
    assert missing_markdown("https://github.com/riverqueue/river/blob/master/README.md", citing) == []
    assert missing_markdown("see STYLE.md and ../shared/X.md", citing) == ["STYLE.md", "../shared/X.md"]


# ---------------------------------------------------------------- the repository


def test_the_protocol_document_exists_with_numbered_sections() -> None:
    sections = protocol_sections(PROTOCOL_DOC.read_text(encoding="utf-8"))
    # Every chapter the code leans on, 1 to 18.
    assert {str(n) for n in range(1, 19)} <= sections


@pytest.mark.parametrize("path", repo_text_files(), ids=_rel)
def test_no_file_points_outside_the_repository(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert outside_references(text, _rel(path)) == []
    assert missing_markdown(text, path) == []


def test_every_section_citation_resolves() -> None:
    sections = protocol_sections(PROTOCOL_DOC.read_text(encoding="utf-8"))
    dangling = {
        f"{_rel(path)}: §{number}"
        for path in repo_text_files()
        for number in cited_sections(path.read_text(encoding="utf-8"))
        if number not in sections
    }
    assert sorted(dangling) == []
