"""Every lecture and assignment that a notebook, the README or a page of docs/ names exists.

Lectures are referred to by file stem (`05_masks_and_leakage`) or by number ("lecture 4",
"Lecture 04", "lectures 5 and 6"); assignments by id (`a2_multihead_masking`) or by number
("assignment 2"). A renamed or renumbered lecture leaves such references dangling, and nothing else
notices: this test reads the text of every cell (markdown and code) of lectures/, solutions/ and
assignments/, the README and docs/*.md, and checks each reference against what is on disk.
"""
import re
from pathlib import Path

import nbformat
import pytest

REPO = Path(__file__).resolve().parent.parent
LECTURE_STEMS = {p.stem for p in (REPO / "lectures").glob("[0-9][0-9]_*.ipynb")}
LECTURE_NUMBERS = {int(stem[:2]) for stem in LECTURE_STEMS}
ASSIGNMENT_IDS = {p.name for p in (REPO / "solutions").iterdir() if re.fullmatch(r"a\d+_\w+", p.name)}
ASSIGNMENT_NUMBERS = {int(re.match(r"a(\d+)_", a).group(1)) for a in ASSIGNMENT_IDS}

# `05_masks_and_leakage`: two digits, an underscore, lower-case words
LECTURE_NAME = re.compile(r"(?<![\w-])(\d\d_[a-z]+(?:_[a-z]+)*)\b")
# `a2_multihead_masking`, but not file names that merely start like one (`a1_canvas.csv`)
ASSIGNMENT_ID = re.compile(r"(?<![\w-])(a\d+_[a-z]+(?:_[a-z]+)*)\b(?!\.(?!ipynb\b)\w)")
# "lecture 4", "Lecture 04", "lectures 5 and 6", "lectures 1, 2 or 3", "lectures 3-4"
NUMBERED = r"\b{word}s?\s+(\d+(?:\s*(?:,|and|or|-|–|to)\s*\d+)*)\b"
LECTURE_NUMBER = re.compile(NUMBERED.format(word="[Ll]ecture"))
ASSIGNMENT_NUMBER = re.compile(NUMBERED.format(word="[Aa]ssignment"))


def _documents():
    notebooks = sorted((REPO / "lectures").glob("*.ipynb"))
    notebooks += sorted((REPO / "solutions").glob("*/*.ipynb"))
    notebooks += sorted((REPO / "assignments").glob("*/*.ipynb"))
    docs = []
    for path in notebooks:
        nb = nbformat.read(str(path), as_version=4)
        for index, cell in enumerate(nb.cells):
            docs.append((f"{path.relative_to(REPO)} [cell {index}]", cell.source))
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            docs.append((f"{page.relative_to(REPO)}:{number}", line))
    return docs


DOCUMENTS = _documents()
# made-up names a page uses on purpose: the instructors' walk-through adds an example assignment
EXAMPLES = {"docs/instructors.md": {"a8_paged_attention"}}


def _broken(pattern, is_known, numbers=False):
    broken = []
    for where, text in DOCUMENTS:
        examples = EXAMPLES.get(where.split(":")[0], set())
        for match in pattern.finditer(text):
            names = re.findall(r"\d+", match.group(1)) if numbers else [match.group(1)]
            if not all(is_known(name) or name in examples for name in names):
                broken.append(f"{where}: {match.group(0)!r}")
    return broken


def test_what_the_references_are_checked_against():
    assert len(LECTURE_STEMS) == len(LECTURE_NUMBERS) >= 6, sorted(LECTURE_STEMS)
    assert ASSIGNMENT_IDS == {p.name for p in (REPO / "assignments").iterdir() if p.is_dir()
                              and re.fullmatch(r"a\d+_\w+", p.name)}, "solutions/ and assignments/ disagree"
    assert len(ASSIGNMENT_IDS) == len(ASSIGNMENT_NUMBERS) >= 4


@pytest.mark.parametrize("kind, pattern, is_known", [
    ("lecture file names", LECTURE_NAME, lambda name: name in LECTURE_STEMS),
    ("assignment ids", ASSIGNMENT_ID, lambda name: name in ASSIGNMENT_IDS),
    ("lecture numbers", LECTURE_NUMBER, lambda n: int(n) in LECTURE_NUMBERS),
    ("assignment numbers", ASSIGNMENT_NUMBER, lambda n: int(n) in ASSIGNMENT_NUMBERS),
], ids=["lecture-names", "assignment-ids", "lecture-numbers", "assignment-numbers"])
def test_every_named_lecture_and_assignment_exists(kind, pattern, is_known):
    broken = _broken(pattern, is_known, numbers=pattern in (LECTURE_NUMBER, ASSIGNMENT_NUMBER))
    assert not broken, (f"{len(broken)} reference(s) by {kind} to something that does not exist "
                        f"(lectures: {sorted(LECTURE_STEMS)}; assignments: {sorted(ASSIGNMENT_IDS)}):\n  "
                        + "\n  ".join(broken))


@pytest.mark.parametrize("text, pattern, found", [
    ("Read lecture `03_multihead_and_masks` first.", LECTURE_NAME, ["03_multihead_and_masks"]),
    ("open lectures/07_capstone.ipynb", LECTURE_NAME, ["07_capstone"]),
    ("2026-10-01_report and 12_b3", LECTURE_NAME, []),
    ("`a4_kv_cache`, then a2_multihead_masking/", ASSIGNMENT_ID, ["a4_kv_cache", "a2_multihead_masking"]),
    ("--output a1_canvas.csv and a1_jdoe_attempt_2026-10-01", ASSIGNMENT_ID, []),
    ("memory-bound (lecture 04); Lectures 5 and 7", LECTURE_NUMBER, ["04", "5 and 7"]),
    ("In assignment 1 you wrote", ASSIGNMENT_NUMBER, ["1"]),
])
def test_the_patterns_find_what_they_should(text, pattern, found):
    assert [m.group(1) for m in pattern.finditer(text)] == found
