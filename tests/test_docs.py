"""The documentation stays true to the code and to itself: every `grader` verb is documented as a
command; the README stays a short front door; every relative link in the README and docs/ leads to
a file that exists (and, into a Markdown file, to a heading it has); the README's syllabus names
the same lectures and assignments, in the same order, as docs/syllabus.md, the one source that
`grader publish` reads; and the product's prose says what things are, not when or why they were
added. Fast: reads files only."""
import argparse
import re
from pathlib import Path

import pytest

from grader.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").rglob("*.md"))
# docs/student-readme.md is the template of the students' README: its links are written for the
# root of the published repository, which has the same layout as this one for what it links
TEMPLATES = {REPO / "docs" / "student-readme.md"}
README_MAX_LINES = 160
HISTORY = re.compile(r"issue\s+#?[0-9]+|(first|second|third|fourth|fifth|this|earlier|later|last)\s+session"
                     r"|this\s+round|since\s+then|round\s+two|no\s+gpu\s+(has\s+been|was)\s+lent", re.I)
# the product: code, tests, notebooks, docs, CI scripts, requirement files (not this test, which
# holds the pattern)
PRODUCT_GLOBS = ("*.md", "*.txt", "*.toml", "*.yml", "*.py", "Makefile", ".ci/*", ".github/**/*.yml",
                 "docs/**/*.md", "grader/**/*.py", "tests/**/*.py", "tools/*", "benchmarks/*", "deploy/**/*",
                 "mutants/*.py", "alternatives/*.py", "lectures/*.ipynb", "solutions/**/*.ipynb",
                 "assignments/**/*.ipynb")
HISTORY_FREE = sorted({path for pattern in PRODUCT_GLOBS for path in REPO.glob(pattern)
                       if path.is_file() and path != Path(__file__).resolve()
                       and not any(part in (".venv", "__pycache__", "state") for part in path.parts)})


def _verbs():
    parser = build_parser()
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert len(subparsers) == 1, "grader's command line should have one set of verbs"
    return sorted(subparsers[0].choices)


def _section(text, heading):
    """The body of the section `heading` (a '## ' line), up to the next heading of its level."""
    match = re.search(rf"^{re.escape(heading)}[ \t]*\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    return match.group(1) if match else ""


def _table(text):
    """The first Markdown table in `text`: its rows (after the header and the rule) as cell lists."""
    lines = []
    for line in text.splitlines():
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            break
    return [[cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))] for line in lines[2:]]


def _documented_commands():
    """The text of the command cells of the README's instructors table and docs/instructors.md's
    command table."""
    tables = [_table(_section(README.read_text(), "## Instructors")),
              _table(_section((REPO / "docs" / "instructors.md").read_text(), "## The commands"))]
    return [" ".join(row[1:]) for table in tables for row in table]


VERBS = _verbs()


def test_the_verbs_are_found():
    assert {"autograde", "check", "release", "publish"} <= set(VERBS), VERBS
    assert _documented_commands(), \
        "no command table in README.md (## Instructors) or docs/instructors.md (## The commands)"


@pytest.mark.parametrize("verb", VERBS)
def test_every_grader_verb_is_documented(verb):
    command = re.compile(rf"`(?:python -m grader|grader) {re.escape(verb)}\b")
    assert any(command.search(cell) for cell in _documented_commands()), (
        f"`grader {verb}` is not documented: add a row with `python -m grader {verb} ...` to the command "
        "table of docs/instructors.md (## The commands) or the README's instructors table")


@pytest.mark.parametrize("verb", VERBS)
def test_every_verbs_help_says_what_it_reads_and_writes(verb):
    import contextlib
    import io

    from grader.cli import build_parser
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), pytest.raises(SystemExit):
        build_parser().parse_args([verb, "--help"])
    text = shown.getvalue()
    assert re.search(r"^reads:  \S", text, re.M) and re.search(r"^writes: \S", text, re.M), \
        f"`python -m grader {verb} --help` should say what it reads and writes (READS_WRITES in grader/cli.py):\n{text}"


def test_readme_is_a_front_door():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move details to docs/")
    headings = [line for line in lines if line.startswith("## ")]
    for heading in ("## Syllabus", "## Students", "## Instructors", "## Contributors", "## Prerequisites"):
        assert heading in headings, f"README.md has no {heading!r} section"


# ---- links ----

def _without_code(text):
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _links(path):
    text = _without_code(path.read_text())
    return re.findall(r"\]\(([^)\s]+)\)", text) + re.findall(r'src="([^"]+)"', text)


def _slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(path):
    return {_slug(line.lstrip("#")) for line in _without_code(path.read_text()).splitlines()
            if re.match(r"#{1,6} ", line)}


DOCUMENTS = [README, *DOCS]


@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_resolve(path):
    base = REPO if path in TEMPLATES else path.parent
    broken = []
    for link in _links(path):
        if re.match(r"[a-z]+:", link) or "{{" in link:       # http(s), mailto; template placeholders
            continue
        target, _, anchor = link.partition("#")
        resolved = (base / target).resolve() if target else path
        if not resolved.exists():
            broken.append(f"{link} (no {resolved.relative_to(REPO) if resolved.is_relative_to(REPO) else resolved})")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{link} (no heading #{anchor} in {resolved.relative_to(REPO)})")
    assert not broken, f"{path.relative_to(REPO)} links to what does not exist:\n  " + "\n  ".join(broken)


def test_the_link_finder_finds_links():
    assert "docs/instructors.md" in _links(README)
    assert any(link.startswith("../lectures/") for link in _links(REPO / "docs" / "syllabus.md"))
    assert _slug("Two repositories: the key stays private") == "two-repositories-the-key-stays-private"


# ---- the syllabus: one source, shown twice ----

def _syllabus_rows(text):
    """(number, lecture link, assignment cell) of each row, links made relative to the root."""
    rows = []
    for row in _table(text):
        cells = [cell.replace("](../", "](") for cell in row]
        lecture = re.search(r"\]\((lectures/[^)]+)\)", cells[1])
        rows.append((cells[0], lecture.group(1) if lecture else cells[1], cells[2]))
    return rows


def test_readme_syllabus_agrees_with_docs_syllabus():
    source = _syllabus_rows((REPO / "docs" / "syllabus.md").read_text())
    shown = _syllabus_rows(_section(README.read_text(), "## Syllabus"))
    assert source, "docs/syllabus.md has no syllabus table"
    lectures = sorted(f"lectures/{p.name}" for p in (REPO / "lectures").glob("[0-9][0-9]_*.ipynb"))
    assert [lecture for _, lecture, _ in source] == lectures, \
        "docs/syllabus.md should have one row per lecture, in order"
    assert shown == source, (
        "the README's syllabus and docs/syllabus.md disagree (lecture and assignment of each row, in order):\n"
        + "\n".join(f"  README {a}\n  docs   {b}" for a, b in zip(shown, source) if a != b)
        + (f"\n  README has {len(shown)} rows, docs/syllabus.md {len(source)}" if len(shown) != len(source) else ""))


# ---- no development history in the product ----

@pytest.mark.parametrize("path", HISTORY_FREE, ids=lambda p: str(p.relative_to(REPO)))
def test_no_development_history(path):
    found = [f"{path.relative_to(REPO)}:{number}: {match.group(0)!r}"
             for number, line in enumerate(path.read_text().splitlines(), 1)
             for match in HISTORY.finditer(line)]
    assert not found, ("say what the thing does or is, not when or why it was added:\n  " + "\n  ".join(found))


# the examples are written in two pieces so that a search of this file's own lines finds nothing
@pytest.mark.parametrize("text, found", [
    ("fixed (issue " "16)", True), ("the fourth " "session's figure", True), ("Since " "then a4 carries", True),
    ("no GPU has been " "lent to this project", True), ("an issue tracker", False),
    ("Colab forgets a session", False), ("Issue #" "12", True),
])
def test_the_history_pattern(text, found):
    assert bool(HISTORY.search(text)) == found


# ---- the front pages count what exists ----

FRONT_PAGES = [README, REPO / "docs" / "syllabus.md", REPO / "docs" / "student-readme.md"]
NUMBER_WORDS = {word: n for n, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen".split())}
# "12 lectures", "Six graded assignments"; not a benchmark's "100 students x 4 assignments"
COUNTED = re.compile(r"(?<!× )(?<!x )\b(\d+|" + "|".join(NUMBER_WORDS)
                     + r")\s+(graded\s+)?(lectures|assignments|debugging\s+labs)\b", re.I)


def _real_counts():
    return {"lectures": len(list((REPO / "lectures").glob("[0-9][0-9]_*.ipynb"))),
            "assignments": len([p for p in (REPO / "assignments").iterdir() if re.fullmatch(r"a\d+_\w+", p.name)]),
            "debugging labs": len([p for p in (REPO / "assignments").iterdir() if p.name.startswith("debug_")])}


@pytest.mark.parametrize("path", FRONT_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_the_front_pages_count_what_exists(path):
    real, wrong = _real_counts(), []
    for match in COUNTED.finditer(path.read_text()):
        number, _, kind = match.groups()
        said = int(number) if number.isdigit() else NUMBER_WORDS[number.lower()]
        kind = re.sub(r"\s+", " ", kind.lower())
        if said != real[kind]:
            wrong.append(f"{match.group(0)!r}: there are {real[kind]} {kind}")
    assert not wrong, f"{path.relative_to(REPO)} counts what the course does not have:\n  " + "\n  ".join(wrong)


def test_the_count_pattern():
    assert [m.group(0) for m in COUNTED.finditer("Nine lectures teach. 6 graded assignments and 4 debugging labs")] == \
        ["Nine lectures", "6 graded assignments", "4 debugging labs"]
    assert not list(COUNTED.finditer("100 students × 4 assignments, 100 students x 4 assignments"))
