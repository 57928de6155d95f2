"""`similarity ID`: how alike the code of an assignment's graded submissions is, pair by pair, for
the instructor to look at. Similarity is evidence to read, never a verdict: students write alike
where a task leaves little choice, and a copy can be disguised past any tool.

What is compared: the code of each graded submission, as the last autograde runs left it
(FOLDER/outcomes/<id>.json names the graded students, FOLDER/autograded/<student>/<id>/<id>.ipynb
holds their notebooks): its answer cells, and any code cell the student added or changed. A
group's file, graded for every member, is compared once, as the group's, and never with itself.

What is not: code every student was given. In each cell compared, the lines that the release's
code cells hold (the answer cells' starter code, the provided and locked cells, the visible tests)
are blanked, and so are docstrings and comments; in a debugging lab also the lines of the fixed
code, the reference solution (a lab's planted code is starter code, and a bug fixed as intended is
nobody's own). Given code pasted elsewhere or laid out anew is removed by copydetect's boilerplate
filter, which is handed the release's code (and a lab's reference).

How: copydetect, the winnowing algorithm behind MOSS (Schleimer, Wilkerson, Aiken, SIGMOD 2003).
Its tokenizer (Pygments) turns every name into one letter and drops whitespace and comments, so
renamed variables, a new layout and new comments change nothing; every run of NOISE tokens is a
fingerprint wherever it stands, so reordered functions match as well. For each side of a pair,
its similarity is the share of its own code that lies in runs the other side has too. A pair is
flagged when either side's share reaches the threshold and the matching runs hold at least
MIN_TOKENS tokens (so that two submissions with a few lines of their own each are not flagged for
sharing an idiom).

Writes FOLDER/similarity/<id>.html (the flagged pairs side by side, matching spans marked and
numbered) and FOLDER/similarity/<id>.csv (the same pairs, for the gradebook's review)."""
import bisect
import functools
import html
import io
import re
import time
from dataclasses import dataclass, field
from itertools import combinations

import copydetect
import numpy as np
import pygments
from copydetect import CodeFingerprint, compare_files
from copydetect.utils import get_token_coverage
from pygments import token
from pygments.lexers import PythonLexer

from . import cells, csv_cells, labs, store
from .submission import Status

NOISE = 25           # copydetect's default noise threshold: runs of fewer tokens never match
THRESHOLD = 50.0     # per cent of one side's own code in runs the other side has too
# Where correct code is written alike whatever its author, its own default: Triton kernels of one algorithm share
# their idioms run for run (loads masked at strided offsets, the online softmax's guarded maximum), so a7's
# independently written alternatives reach 53% to 63% of one another, while its disguised copies reach 99%
THRESHOLDS = {"a7_flash_attention_triton": 75.0}
MIN_TOKENS = 100     # matching tokens a flagged pair holds at least (about four lines of code)
SHOWN = 100          # flagged pairs shown side by side (the table and the CSV list every one)

# the report's colours: (text, background) pairs, each at least WCAG 2.1 AA's 4.5:1
COLOURS = {
    "text": ("#1a1a1a", "#ffffff"),
    "code": ("#1a1a1a", "#f6f8fa"),
    "given": ("#545454", "#f6f8fa"),      # not compared: given code, docstrings, comments
    "mark": ("#000000", "#ffe08a"),       # a matching span
    "tag": ("#ffffff", "#1f4e79"),        # a matching span's number
    "link": ("#0b57a4", "#ffffff"),
    "header": ("#1a1a1a", "#e8eef5"),     # table headers
}


@dataclass
class Given:
    """The code every student of the assignment was given."""
    lines: set        # its lines (comments and docstrings blanked), stripped: blanked wherever a student has them
    shapes: dict      # answer cell's grade id -> the shapes of its given lines: blanked in that cell, names aside
    cells: set        # its code cells, stripped: a cell left as given is not compared
    text: str         # all of it, for copydetect's boilerplate filter


@dataclass
class Work:
    """One side of a comparison: a student's code, or a group's (graded for each member)."""
    name: str                 # the student id, or "group <name>"
    students: tuple           # whom it was graded for
    group: str                # the group's name ("" for a student's own file)
    cells: list               # (label, offset in `text` where the cell's code starts) of each cell compared
    text: str                 # the cells compared, each after a line "# <label>"
    own: str                  # `text` with what was given, docstrings and comments blanked (same length)
    fingerprint: object = field(default=None, repr=False)
    places: tuple = field(default=None, repr=False)     # _fingerprint_places, once worked out

    @property
    def tokens(self):
        """How many of its tokens count: its own code, in runs long enough to match."""
        return int(self.fingerprint.token_coverage)

    def where(self, start, end):
        """'sdpa_solution lines 3-9': the cell and lines of text[start:end]."""
        def place(offset):
            label, begin = max((c for c in self.cells if c[1] <= offset), key=lambda c: c[1], default=self.cells[0])
            return label, self.text.count("\n", begin, max(begin, offset)) + 1
        (first, line_a), (last, line_b) = place(start), place(max(start, end - 1))
        if first == last:
            return f"{first} line {line_a}" if line_a == line_b else f"{first} lines {line_a}-{line_b}"
        return f"{first} line {line_a} to {last} line {line_b}"


@dataclass
class Pair:
    a: Work
    b: Work
    share_a: float            # of a's own code, the share in runs b has too (0 to 1)
    share_b: float
    tokens: int               # tokens in the matching runs (a's side)
    slices_a: np.ndarray = field(repr=False)   # 2 x N: starts and ends of the matching spans in a.text
    slices_b: np.ndarray = field(repr=False)

    @property
    def similarity(self):
        return 100 * max(self.share_a, self.share_b)

    def spans(self, side):
        work, slices = (self.a, self.slices_a) if side == "a" else (self.b, self.slices_b)
        return [work.where(int(s), int(e)) for s, e in zip(slices[0], slices[1])]


@dataclass
class Result:
    assignment_id: str
    works: list
    pairs: list               # every pair compared, most similar first
    flagged: list             # the pairs at the threshold or above, with MIN_TOKENS matching tokens
    not_compared: list        # (who, why)
    threshold: float
    min_tokens: int
    seconds: float = 0.0
    html_path: object = None
    csv_path: object = None


# ---- what was given, what is each student's own ----

def _blank(text):
    return re.sub(r"[^\n]", " ", text)


_NAMES = {token.Name: "V", token.Name.Variable: "V", token.Name.Attribute: "V", token.Name.Class: "O"}


@functools.lru_cache(maxsize=4096)
def read_code(code):
    """(`code` with its comments and docstrings blanked, a tuple of its lines' shapes), read once for each text
    (the release's cells are read for every check, an answer cell left as given in every submission). Blanked means
    spaces, the line breaks kept: the same length, everything else in the same place. A line's
    shape is the line as a renaming leaves it: the names it defines and uses as V, F or O
    (builtins and exceptions kept, as copydetect's tokenizer keeps them), each string as S, no
    whitespace."""
    starts = [0] + [m.end() for m in re.finditer("\n", code)]
    found, parts = [[] for _ in starts], []
    for at, kind, text in PythonLexer().get_tokens_unprocessed(code):
        if kind in token.Comment or kind in token.String.Doc:
            parts.append(_blank(text))
            continue
        parts.append(text)
        if kind not in token.Text:
            found[bisect.bisect_right(starts, at) - 1].append(
                _NAMES.get(kind) or ("F" if kind in token.Name.Function else "S" if kind in token.String else text))
    blanked = "".join(parts)
    return (blanked if len(blanked) == len(code) else code), tuple("".join(line) for line in found)


def given_code(course, assignment_id):
    """What every student of the assignment was given: the release's code cells; in a debugging
    lab, also the fixed code (the reference's answer cells)."""
    release = cells.read(course.release_notebook(assignment_id))
    texts = [cell.source for cell in release.cells if cell.cell_type == "code" and cell.source.strip()]
    answers = [(cells.grade_id(cell), cell.source) for cell in release.cells if cells.is_answer_cell(cell)]
    if labs.is_lab(course, assignment_id):
        source = cells.read(course.source_notebook(assignment_id))
        fixed = [(cells.grade_id(c), cells.without_solution_markers(c.source)) for c in source.cells
                 if cells.is_answer_cell(c)]
        texts += [code for _, code in fixed]
        answers += fixed
    lines = {line.strip() for text in texts for line in read_code(text)[0].splitlines()} - {""}
    by_cell = {}
    for grade_id, code in answers:
        by_cell.setdefault(grade_id, set()).update(read_code(code)[1])
    return Given(lines, {gid: found - {""} for gid, found in by_cell.items()}, {text.strip() for text in texts},
                 "\n\n".join(texts))


def own_code(code, given, grade_id=None):
    """`code` with what was given blanked: its comments and docstrings, every line the release
    has (anywhere), and in an answer cell every line shaped as one its release (and a lab's fixed
    code) has, whatever its names. The same length, everything else in the same place."""
    code, line_shapes = read_code(code)
    cell_shapes = given.shapes.get(grade_id, set())
    return "\n".join(_blank(line) if line.strip() in given.lines or (shape and shape in cell_shapes) else line
                     for line, shape in zip(code.split("\n"), line_shapes))


def compared_cells(nb, given):
    """(label, grade id or None, code) of the cells of a graded notebook that are compared: every
    answer cell (labelled by its grade id), and every other unlocked code cell that is not a test
    and not as given ("cell N", its place in the notebook)."""
    found = []
    for number, cell in enumerate(nb.cells, start=1):
        if cell.cell_type != "code" or cells.is_test_cell(cell) or cells.is_locked(cell):
            continue
        if cells.is_answer_cell(cell):
            found.append((cells.grade_id(cell) or f"cell {number}", cells.grade_id(cell), cell.source))
        elif cell.source.strip() and cell.source.strip() not in given.cells:
            found.append((f"cell {number}", None, cell.source))
    return found


def make_work(name, students, group, pieces, given, boilerplate):
    """A Work of the cells `pieces`, its own code fingerprinted by copydetect."""
    text, own, starts = [], [], []
    at = 0
    for label, grade_id, code in pieces:
        header = f"# {label}\n"
        kept = own_code(code, given, grade_id)
        starts.append((label, at + len(header)))
        text += [header, code, "\n\n"]
        own += [_blank(header), kept, "\n\n"]
        at += len(header) + len(code) + 2
    work = Work(name, tuple(students), group, starts, "".join(text), "".join(own))
    work.fingerprint = fingerprint(work.own, boilerplate)
    return work


def fingerprint(code, boilerplate=frozenset()):
    """copydetect's fingerprint of Python `code`: every run of NOISE tokens (window 1, so the
    result does not depend on Python's hash seed), less those in `boilerplate` (a set of hashes).
    copydetect 0.5.0 would remove boilerplate with numpy's intersect1d(assume_unique=True) over
    the document's hashes, which repeat where its code repeats, and so drop every repeated run,
    given or not; the boilerplate's hashes are taken out here instead, its coverage counted again."""
    found = CodeFingerprint("code.py", NOISE, 1, language="python", fp=io.StringIO(code))
    if boilerplate:
        found.hash_idx = {value: at for value, at in found.hash_idx.items() if value not in boilerplate}
        found.hashes = set(found.hash_idx)
        found.token_coverage = get_token_coverage(found.hash_idx, NOISE, len(found.filtered_code))
    return found


def collect(course, assignment_id, given, boilerplate):
    """(the works to compare, [(who, why not compared)]) from the grading folder."""
    works, not_compared, groups = [], [], {}
    for student, outcome in sorted(store.load_outcomes(course, assignment_id).items()):
        if outcome.get("status") != Status.GRADED:
            continue
        path = store.autograded_notebook(course, student, assignment_id)
        if not path.is_file():
            not_compared.append((student, f"graded, but its notebook is not in {path.parent}"))
            continue
        try:
            pieces = compared_cells(cells.read(path), given)
        except ValueError as error:
            not_compared.append((student, str(error)))
            continue
        group = outcome.get("group") or ""
        key = (group, tuple(pieces))
        if group and key in groups:              # the same file, graded for another member
            groups[key].students += (student,)
            continue
        name = f"group {group}" if group else student
        if any(w.name == name for w in works):   # a member whose file differs from the group's
            name = f"group {group} (as graded for {student})"
        work = make_work(name, (student,), group, pieces, given, boilerplate)
        if group:
            groups[key] = work
        works.append(work)
    compared = []
    for work in works:
        if work.tokens == 0:
            not_compared.append((_who(work), "no code of its own beyond what was given (or too little to match: "
                                              f"fewer than {NOISE} tokens)"))
        else:
            compared.append(work)
    return compared, not_compared


def _who(work):
    return f"{work.name} ({', '.join(work.students)})" if work.group else work.name


def compare(works):
    """Every pair of works that are not the same student or group, most similar first."""
    pairs = []
    for a, b in combinations(works, 2):
        if set(a.students) & set(b.students) or (a.group and a.group == b.group):
            continue
        tokens, (share_a, share_b), (slices_a, slices_b) = compare_files(a.fingerprint, b.fingerprint)
        pairs.append(Pair(a, b, float(share_a), float(share_b), int(tokens), slices_a, slices_b))
    pairs.sort(key=lambda p: (-p.similarity, -p.tokens, p.a.name, p.b.name))
    return pairs


def check_similarity(course, assignment_id, threshold=None, min_tokens=MIN_TOKENS):
    """Compare every graded submission of the assignment with every other; write the HTML report
    and the CSV (FOLDER/similarity/<id>.html and .csv). FileNotFoundError before any autograde.
    `threshold` None: the assignment's own default (THRESHOLDS), else THRESHOLD."""
    started = time.time()
    threshold = THRESHOLDS.get(assignment_id, THRESHOLD) if threshold is None else threshold
    given = given_code(course, assignment_id)
    boilerplate = frozenset(fingerprint(given.text).hashes)
    works, not_compared = collect(course, assignment_id, given, boilerplate)
    pairs = compare(works)
    flagged = [p for p in pairs if p.similarity >= threshold and p.tokens >= min_tokens]
    result = Result(assignment_id, works, pairs, flagged, not_compared, threshold, min_tokens)
    folder = store.similarity_dir(course)
    folder.mkdir(parents=True, exist_ok=True)
    result.csv_path = write_csv(result, folder / f"{assignment_id}.csv")
    result.html_path = folder / f"{assignment_id}.html"
    result.html_path.write_text(report_html(result), encoding="utf-8")
    result.seconds = time.time() - started
    return result


# ---- the CSV ----

CSV_COLUMNS = ("similarity_percent", "a", "a_students", "a_percent", "a_lines", "b", "b_students", "b_percent",
               "b_lines", "matched_tokens")


def write_csv(result, path):
    """One row per flagged pair, most similar first; every cell through csv_cells (no formula a
    spreadsheet would run: a student id such as `=HYPERLINK(...)` is written as text)."""
    rows = [(f"{pair.similarity:.1f}", pair.a.name, "; ".join(pair.a.students), f"{100 * pair.share_a:.1f}",
             "; ".join(pair.spans("a")), pair.b.name, "; ".join(pair.b.students), f"{100 * pair.share_b:.1f}",
             "; ".join(pair.spans("b")), str(pair.tokens)) for pair in result.flagged]
    csv_cells.write_csv(path, CSV_COLUMNS, rows)
    return path


# ---- the HTML report ----

def match_numbers(pair):
    """(numbers of a's marked spans, numbers of b's): a's spans are numbered in order; each of b's
    takes the number of the span of a it shares the most fingerprints with, so that a match reads
    the same number on both sides, wherever the functions stand."""
    common = np.fromiter(pair.a.fingerprint.hashes & pair.b.fingerprint.hashes, dtype=np.int64)
    (hash_a, place_a), (hash_b, place_b) = _fingerprint_places(pair.a), _fingerprint_places(pair.b)
    keep_a, keep_b = np.isin(hash_a, common), np.isin(hash_b, common)
    hash_a, span_a = hash_a[keep_a], np.searchsorted(pair.slices_a[0], place_a[keep_a], side="right") - 1
    hash_b, span_b = hash_b[keep_b], np.searchsorted(pair.slices_b[0], place_b[keep_b], side="right") - 1
    order = np.argsort(hash_b, kind="stable")
    hash_b, span_b = hash_b[order], span_b[order]
    counts = np.zeros((pair.slices_a.shape[1], pair.slices_b.shape[1]), dtype=np.int64)
    if len(hash_a) and len(hash_b):     # each of a's fingerprints with (the first of) b's of the same hash
        at = np.minimum(np.searchsorted(hash_b, hash_a), len(hash_b) - 1)
        np.add.at(counts, (span_a, span_b[at]), 1)
    return list(range(1, counts.shape[0] + 1)), [int(np.argmax(counts[:, j])) + 1 for j in range(counts.shape[1])]


def _fingerprint_places(work):
    """(hash, place in work.text) of every fingerprint of the work, as two arrays. The places are
    mapped from copydetect's filtered code as compare_files maps the ends of its spans."""
    if work.places is not None:
        return work.places
    fp = work.fingerprint
    hashes = np.array([value for value, found in fp.hash_idx.items() for _ in found], dtype=np.int64)
    places = np.array([at for found in fp.hash_idx.values() for at in found], dtype=np.int64)
    if len(fp.offsets):
        places = places + fp.offsets[:, 1][np.clip(np.searchsorted(fp.offsets[:, 0], places), 0,
                                                   fp.offsets.shape[0] - 1)]
    work.places = (hashes, places)
    return work.places


def _code_html(work, slices, numbers):
    """The work's code, line by line in spans: each matching span's own code in <mark>s (what was
    given, the docstrings and comments inside a span left out), its number at the span's first mark
    and at its first mark in every further cell; what was not compared in the `given` style; the
    rest of its own code plain. No element but <code> holds a line break, and no text lies outside a
    span but whitespace (so that every piece of text is either in view or out of it)."""
    text, own = work.text, work.own
    size = len(text)
    span_of = np.full(size, -1)
    for k, (start, end) in enumerate(zip(slices[0], slices[1])):
        span_of[int(start):int(end)] = k
    blanked = (np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
               != np.frombuffer(own.encode("utf-32-le"), dtype=np.uint32))
    # a character's kind: 0 whitespace outside any span, 1 own code, 2 not compared, 3 + k in match k
    kind = np.where(blanked, 2, np.where(span_of >= 0, 3 + span_of, 1))
    for match in re.finditer(r"\s+", text):
        start, end = match.span()
        inside = start and end < size and "\n" not in text[start:end] and kind[start - 1] == kind[end]
        kind[start:end] = kind[end] if inside else 0
    bounds = [0, *(np.flatnonzero(kind[1:] != kind[:-1]) + 1).tolist(), size]
    cell_starts = sorted(start for _, start in work.cells)
    tagged, out = set(), []
    for start, end in zip(bounds[:-1], bounds[1:]):
        chunk, what = html.escape(text[start:end]), int(kind[start])
        if what >= 3:
            where = (what - 3, bisect.bisect_right(cell_starts, start))
            out.append(f"<mark>{'' if where in tagged else _tag(numbers[what - 3])}{chunk}</mark>")
            tagged.add(where)
        else:
            out.append(("{}", "<span>{}</span>", '<span class="given">{}</span>')[what].format(chunk))
    return "".join(out)


def _shown_note(count):
    if count <= SHOWN:
        return ""
    return (f"<p>The {SHOWN} most similar of the {count} flagged pairs; the table above and the CSV list every one. "
            "So many flagged pairs usually mean a threshold too low for this assignment: the task may leave little "
            "choice.</p>")


def _tag(number):
    return f'<span class="tag"><span class="sr-only">match </span>{number}</span>'


def _count(n, noun):
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _style():
    c = COLOURS
    return f"""
body{{font-family:system-ui,sans-serif;color:{c['text'][0]};background:{c['text'][1]};margin:0}}
main{{max-width:1400px;margin:0 auto;padding:1em clamp(0.5em,3vw,2em)}}
h1,h2,h3,h4,p,li,caption{{overflow-wrap:anywhere}}
a{{color:{c['link'][0]}}}
table{{border-collapse:collapse;margin:0.5em 0 1.5em}}
th,td{{border:1px solid #8a8a8a;padding:3px 10px;text-align:left;vertical-align:top;overflow-wrap:anywhere}}
th{{color:{c['header'][0]};background:{c['header'][1]}}}
.sides{{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(32em,100%),1fr));gap:1em}}
.code{{max-height:36em;overflow:auto;border:1px solid #6b6b6b;color:{c['code'][0]};background:{c['code'][1]}}}
.code:focus{{outline:3px solid {c['tag'][1]};outline-offset:2px}}
pre{{margin:0;padding:0.5em;font-size:0.85em;line-height:1.45;white-space:break-spaces;overflow-wrap:anywhere}}
.given{{color:{c['given'][0]};font-style:italic}}
mark{{color:{c['mark'][0]};background:{c['mark'][1]};text-decoration:underline;text-decoration-thickness:2px;
  text-underline-offset:3px}}
.tag{{color:{c['tag'][0]};background:{c['tag'][1]};font-weight:bold;font-style:normal;padding:0 0.3em;
  margin-right:0.2em;border-radius:0.3em;text-decoration:none;display:inline-block}}
.sr-only{{position:absolute;width:1px;height:1px;padding:0;margin:-1px;overflow:hidden;clip:rect(0,0,0,0);
  white-space:nowrap;border:0}}
"""


def _table(caption, header, rows):
    head = "".join(f'<th scope="col">{html.escape(h)}</th>' for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return (f"<table><caption>{html.escape(caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def _side(pair, side, number, numbers):
    work, share, slices = (pair.a, pair.share_a, pair.slices_a) if side == "a" else (pair.b, pair.share_b,
                                                                                        pair.slices_b)
    who = html.escape(_who(work))
    return (f'<div><h4>{who}: {100 * share:.0f}% of its own code matches</h4><div class="code" tabindex="0" '
            f'role="region" aria-label="pair {number}, code of {who}: matching spans marked and numbered">'
            f"<pre><code>{_code_html(work, slices, numbers)}</code></pre></div></div>")


def report_html(result):
    """The page: what was compared, the flagged pairs in a table, how the scores spread, and
    each flagged pair side by side."""
    aid = html.escape(result.assignment_id)
    n_pairs, flagged = len(result.pairs), result.flagged
    summary = _table("What was compared", ("what", "how many"), [
        ("submissions compared (a group's file counts once)", len(result.works)),
        ("pairs compared", n_pairs),
        (f"pairs flagged: {result.threshold:g}% or more of either side's own code matching, in at least "
         f"{result.min_tokens} matching tokens", len(flagged)),
        ("graded submissions not compared (below)", len(result.not_compared)),
    ])
    pair_rows = [(f'<a href="#pair-{n}">{n}</a>' if n <= SHOWN else n, f"{p.similarity:.0f}%", html.escape(_who(p.a)),
                  f"{100 * p.share_a:.0f}%", html.escape(_who(p.b)), f"{100 * p.share_b:.0f}%", p.tokens)
                 for n, p in enumerate(flagged, start=1)]
    pairs_table = (_table(f"Pairs at {result.threshold:g}% or more, most similar first",
                          ("pair", "similarity", "a", "a's share", "b", "b's share", "matching tokens"), pair_rows)
                   if flagged else f"<p>No pair reaches {result.threshold:g}% with {result.min_tokens} matching tokens "
                                   "or more.</p>")
    bins = [0] * 10
    for pair in result.pairs:
        bins[min(int(pair.similarity // 10), 9)] += 1
    spread = _table("Pairs by similarity (the higher of the two shares)", ("similarity", "pairs"),
                    [(f"{10 * k}% to {10 * k + 10}%" + (" (inclusive)" if k == 9 else ""), count)
                     for k, count in enumerate(bins)])
    not_compared = (_table("Graded submissions not compared", ("submission", "why"),
                           [(html.escape(who), html.escape(why)) for who, why in result.not_compared])
                    if result.not_compared else "<p>None: every graded submission was compared.</p>")
    details = []
    for number, pair in enumerate(flagged[:SHOWN], start=1):
        numbers_a, numbers_b = match_numbers(pair)
        details.append(
            f'<section aria-labelledby="pair-{number}"><h3 id="pair-{number}">Pair {number}: '
            f"{html.escape(_who(pair.a))} and {html.escape(_who(pair.b))}, {pair.similarity:.0f}%</h3>"
            f"<p>{pair.tokens} matching tokens in {_count(pair.slices_a.shape[1], 'span')} of "
            f"{html.escape(pair.a.name)} and {pair.slices_b.shape[1]} of {html.escape(pair.b.name)}; a span's number "
            "is the same on both sides."
            f'</p><div class="sides">{_side(pair, "a", number, numbers_a)}{_side(pair, "b", number, numbers_b)}'
            "</div></section>")
    return f"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{aid}: similarity of the submitted code</title>
<style>{_style()}</style></head>
<body><main>
<h1>{aid}: similarity of the submitted code</h1>
<p><strong>Similarity is evidence to look at, never a verdict.</strong> Students write alike where the task
leaves little choice (the names and layers it prescribes, a standard formula), and a pair below the threshold
is not thereby cleared. Read both sides before you speak to anyone.</p>
<h2>How to read it</h2>
<ul>
<li>Compared: the answer cells of each graded submission, and any code cell a student added or changed. Not
compared (shown <span class="given">grey and in italics</span>): code every student was given (the release's
starter code, the provided cells, the visible tests; in a debugging lab also the colleague's code and its
fixed form), docstrings and comments.</li>
<li>Names, layout and comments do not count: variables renamed, functions reordered or comments rewritten still
match. A side's share is the part of its own code that lies in runs of at least {NOISE} tokens the other side
has too.</li>
<li>Matching spans are <mark>{_tag(1)}marked</mark>,
underlined and numbered; a span carries the same number on both sides.</li>
</ul>
<h2>Summary</h2>
{summary}
{pairs_table}
<h2>How the pairs spread</h2>
{spread}
<h2>Not compared</h2>
{not_compared}
<h2>The flagged pairs, side by side</h2>
{_shown_note(len(flagged))}{''.join(details) or '<p>None.</p>'}
<p>Made by <code>python -m grader similarity {aid}</code> with copydetect {copydetect.__version__} and Pygments
{pygments.__version__}.</p>
</main></body></html>
"""
