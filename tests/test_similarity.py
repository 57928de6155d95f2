"""The similarity check (`python -m grader similarity ID`): disguised copies are flagged, the
catalogue's independently written alternatives are not, given code never counts, a group's file is
one submission, the report is accessible and the CSV safe in a spreadsheet. Fast: the graded
notebooks are written where autograde leaves them, nothing is graded; the last test grades through
the sandboxed pipeline (marked kernel and sandbox)."""
import ast
import csv
import html.parser
import re

import nbformat
import pytest
from copydetect import compare_files

from grader import cells, samples
from grader import similarity as sim
from grader.cli import build_parser, main
from grader.labs import lab_bugs
from grader.similarity import COLOURS, MIN_TOKENS, THRESHOLD, check_similarity
from support import ASSIGNMENT_IDS, COURSE, LAB_IDS
from support.accessibility import contrast
from support.similarity import write_graded

A1 = "a1_self_attention"


def _course(tmp_path):
    return COURSE.with_grading_dir(tmp_path / "course")


def _pairs(result):
    return {frozenset((p.a.name, p.b.name)): p for p in result.pairs}


def _flagged(result):
    return {frozenset((p.a.name, p.b.name)) for p in result.flagged}


# ---- the catalogue: disguised copies flagged, independent alternatives not ----

@pytest.mark.parametrize("assignment_id", ASSIGNMENT_IDS + LAB_IDS)
def test_disguised_copies_are_flagged_and_independent_alternatives_are_not(assignment_id, tmp_path):
    course = _course(tmp_path)
    originals = samples.independent_submissions(course, assignment_id)
    assert len(originals) >= 2, f"{assignment_id}: the catalogue gives fewer than two independent submissions"
    notebooks = {f"own{i}": nb for i, nb in enumerate(originals)}
    for i, nb in enumerate(originals):
        notebooks[f"copy{i}"] = samples.disguised_copy(course, assignment_id, nb, seed=i)
    write_graded(course, assignment_id, notebooks)
    result = check_similarity(course, assignment_id)
    pairs, flagged = _pairs(result), _flagged(result)
    compared = {w.name: w for w in result.works}
    for i in range(len(originals)):
        original, copy = f"own{i}", f"copy{i}"
        assert original in compared, f"{assignment_id}: {original} has no code of its own: {result.not_compared}"
        pair = pairs[frozenset((original, copy))]
        assert pair.similarity >= THRESHOLD, (f"{assignment_id}: {copy}, a disguised copy of {original}, is only "
                                              f"{pair.similarity:.0f}% similar")
        if compared[original].tokens >= MIN_TOKENS:
            assert frozenset((original, copy)) in flagged, f"{assignment_id}: {copy} is not flagged ({pair})"
    for key in flagged:
        assert len({re.sub(r"\D", "", name) for name in key}) == 1, (
            f"{assignment_id}: {sorted(key)} flagged at {pairs[key].similarity:.0f}%, though written independently "
            f"(the catalogue's alternatives): {pairs[key].spans('a')}")


def test_a_disguised_copy_is_renamed_reordered_and_recommented_and_still_parses():
    original = samples.independent_submissions(COURSE, "a2_multihead_masking")[1]
    copy = samples.disguised_copy(COURSE, "a2_multihead_masking", original, seed=3)
    before = {cells.grade_id(c): c.source for c in original.cells if cells.is_answer_cell(c)}
    after = {cells.grade_id(c): c.source for c in copy.cells if cells.is_answer_cell(c)}
    assert before.keys() == after.keys()
    for grade_id, source in after.items():
        ast.parse(source)
        assert source != before[grade_id], f"{grade_id} was not disguised"
    heads = after["heads_solution"]
    assert heads.index("def merge_heads") < heads.index("def split_heads"), "definitions not reordered"
    names = lambda code: {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}  # noqa: E731
    assert names(before["mha_solution"]) - names(after["mha_solution"]), "no local variable renamed"
    comments = lambda code: {line.strip() for line in code.splitlines() if line.strip().startswith("#")}  # noqa: E731
    assert comments(after["mha_solution"]) - comments(before["mha_solution"]), "no comment changed"


# ---- what counts: given code never, a group once ----

def test_given_code_is_not_compared_a_students_own_cells_are(tmp_path):
    course = _course(tmp_path)
    release = samples.release_notebook(course, A1)
    commented = nbformat.from_dict(release)        # the starter code, only its comments and docstrings changed
    for cell in commented.cells:
        if cells.is_answer_cell(cell):
            cell.source = cell.source.replace('"""', '"""Mine: ', 1).replace("# YOUR CODE HERE", "# working on it")
    pasted = nbformat.from_dict(release)           # the provided helpers pasted into an answer cell
    provided = "\n\n".join(c.source for c in release.cells if cells.provided_file(c))
    next(c for c in pasted.cells if cells.is_answer_cell(c)).source += "\n\n" + provided
    perfect = samples.perfect_submission(course, A1)
    helper = nbformat.from_dict(perfect)           # the perfect answer and a cell of the student's own
    helper.cells.insert(3, nbformat.v4.new_code_cell("def my_softmax(x):\n    shifted = x - x.max(dim=-1, "
                                                     "keepdim=True).values\n    return shifted.exp() / shifted.exp()"
                                                     ".sum(dim=-1, keepdim=True)\n"))
    write_graded(course, A1, {"untouched": release, "commented": commented, "pasted": pasted, "perfect": perfect,
                              "helper": helper})
    result = check_similarity(course, A1)
    assert {w.name for w in result.works} == {"perfect", "helper"}
    assert {who for who, _ in result.not_compared} == {"untouched", "commented", "pasted"}
    assert all("no code of its own" in why for _, why in result.not_compared)
    labels = [label for label, _ in next(w for w in result.works if w.name == "helper").cells]
    assert "cell 4" in labels and "sdpa_solution" in labels, labels
    perfect_labels = [label for label, _ in next(w for w in result.works if w.name == "perfect").cells]
    assert not [label for label in perfect_labels if label.startswith("cell")], \
        f"the release's own ordinary cells, left as given, were compared: {perfect_labels}"


@pytest.mark.parametrize("lab_id", LAB_IDS)
def test_a_labs_planted_code_and_its_fix_are_given(lab_id, tmp_path):
    course = _course(tmp_path)
    fixed = samples.perfect_submission(course, lab_id)
    one_left = samples.lab_submission(course, lab_id, [lab_bugs(course, lab_id)[0].name])
    renamed = samples.disguised_copy(course, lab_id, fixed, seed=1)
    write_graded(course, lab_id, {"untouched": samples.release_notebook(course, lab_id), "fixed": fixed,
                                  "renamed": renamed, "one_left": one_left})
    result = check_similarity(course, lab_id)
    assert not result.works, f"{lab_id}: given code compared: {[(w.name, w.tokens) for w in result.works]}"
    assert len(result.not_compared) == 4 and not result.pairs


def test_a_groups_file_is_compared_once_and_never_with_itself(tmp_path):
    course = _course(tmp_path)
    own = samples.independent_submissions(course, A1)
    write_graded(course, A1, {"ada": own[1], "cy": samples.disguised_copy(course, A1, own[1]), "eve": own[2],
                              "dan": own[3]},
                 groups={"Team 7": ["ada", "bob"]},
                 outcomes={"fay": {"student": "fay", "status": "not graded", "reason": "invalid JSON"},
                           "gus": {"student": "gus", "status": "missing", "reason": "no submission"}})
    result = check_similarity(course, A1)
    names = sorted(w.name for w in result.works)
    assert names == ["cy", "dan", "eve", "group Team 7"], names
    group = next(w for w in result.works if w.group)
    assert group.students == ("ada", "bob")
    assert all(set(p.a.students).isdisjoint(p.b.students) for p in result.pairs)
    assert len(result.pairs) == 6                 # 4 submissions, each pair once
    assert _flagged(result) == {frozenset(("cy", "group Team 7"))}
    rows = list(csv.DictReader(result.csv_path.open(encoding="utf-8")))
    assert len(rows) == 1
    group_side = "a" if rows[0]["a"] == "group Team 7" else "b"
    assert rows[0][f"{group_side}_students"] == "ada; bob"
    assert float(rows[0]["similarity_percent"]) >= THRESHOLD and int(rows[0]["matched_tokens"]) >= MIN_TOKENS
    assert re.match(r"\w+_solution lines? \d+", rows[0]["a_lines"]), rows[0]["a_lines"]


def test_a_graded_student_without_a_notebook_is_named(tmp_path):
    course = _course(tmp_path)
    own = samples.independent_submissions(course, A1)
    write_graded(course, A1, {"ada": own[0], "bob": own[1]})
    (course.grading_dir / "autograded" / "bob" / A1 / f"{A1}.ipynb").unlink()
    result = check_similarity(course, A1)
    assert [w.name for w in result.works] == ["ada"] and not result.pairs
    assert result.not_compared[0][0] == "bob" and "not in" in result.not_compared[0][1]


# ---- the pieces ----

def test_read_code_blanks_notes_in_place_and_a_renamed_line_keeps_its_shape():
    code = 'def f(x):\n    """Doc\n    string."""\n    total = x.sum(dim=-1)  # add up\n    return total\n'
    blanked, shapes = sim.read_code(code)
    assert len(blanked) == len(code) and blanked.count("\n") == code.count("\n")
    assert "Doc" not in blanked and "add up" not in blanked and "total = x.sum(dim=-1)" in blanked
    renamed = sim.read_code(code.replace("total", "acc").replace("x", "inputs"))[1]
    assert shapes == renamed and shapes[3] == "V=V.V(V=-1)"
    assert sim.read_code("raise ValueError('x')")[1] != sim.read_code("raise NotImplementedError('x')")[1]


def test_repeated_code_keeps_its_fingerprints_beside_boilerplate():
    """copydetect 0.5.0's own boilerplate filter drops every run a document repeats; the check's
    keeps them and drops only the boilerplate's."""
    block = "scores = torch.matmul(queries, keys.transpose(-2, -1)) / math.sqrt(width)\n"
    code = block + "other = 1\n" + block
    given = sim.fingerprint("def unrelated(a, b):\n    return [a, b, a, b, a, b, a, b, a]\n")
    alone, beside = sim.fingerprint(code), sim.fingerprint(code, frozenset(given.hashes))
    assert beside.hash_idx == alone.hash_idx and beside.token_coverage == alone.token_coverage
    assert any(len(places) == 2 for places in beside.hash_idx.values()), "the repeated block lost its fingerprints"
    assert not sim.fingerprint(code, frozenset(alone.hashes)).hashes, "the boilerplate's own runs stayed"


def test_matches_carry_the_same_number_on_both_sides_wherever_they_stand():
    first = ("def first(values, scale):\n    shifted = values - values.max(dim=-1, keepdim=True).values\n"
             "    weights = shifted.exp() / shifted.exp().sum(dim=-1, keepdim=True)\n"
             "    return (weights * scale).cumsum(dim=0)[::2]\n")
    second = ("def second(rows):\n    out = []\n    for index, row in enumerate(rows):\n"
              "        out.append(row.flip(0) * index + row.roll(1).abs() ** 0.5)\n"
              "    return torch.stack(out, dim=1)\n")
    given = sim.Given(set(), {}, set(), "")
    a = sim.make_work("a", ("a",), "", [("cell_1", None, first + "\n\n" + second)], given, None)
    b = sim.make_work("b", ("b",), "", [("cell_1", None, second + "\n\n" + first)], given, None)
    tokens, _, (slices_a, slices_b) = compare_files(a.fingerprint, b.fingerprint)
    numbers_a, numbers_b = sim.match_numbers(sim.Pair(a, b, 1.0, 1.0, int(tokens), slices_a, slices_b))
    assert numbers_a == [1, 2] and numbers_b == [2, 1], (numbers_a, numbers_b)


def test_the_csv_writes_formula_like_student_ids_as_text(tmp_path):
    course = _course(tmp_path)
    own = samples.independent_submissions(course, A1)
    write_graded(course, A1, {"=SUM(A1)": own[1], "@bob": samples.disguised_copy(course, A1, own[1])})
    result = check_similarity(course, A1)
    rows = list(csv.reader(result.csv_path.open(encoding="utf-8")))
    assert rows[1][1:3] == ["'=SUM(A1)", "'=SUM(A1)"] and rows[1][5:7] == ["'@bob", "'@bob"], rows


# ---- the report: accessible ----

class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.headings, self.ids = [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if attrs.get("id"):
            self.ids.append(attrs["id"])
        if re.fullmatch(r"h[1-6]", tag):
            self.headings.append(int(tag[1]))


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    course = COURSE.with_grading_dir(tmp_path_factory.mktemp("report") / "course")
    own = samples.independent_submissions(course, "a2_multihead_masking")
    write_graded(course, "a2_multihead_masking",
                 {"<b>ada": own[1], "bob": samples.disguised_copy(course, "a2_multihead_masking", own[1]),
                  "cy": own[2], "dee": samples.release_notebook(course, "a2_multihead_masking")})
    result = check_similarity(course, "a2_multihead_masking")
    page = _Page()
    text = result.html_path.read_text(encoding="utf-8")
    page.feed(text)
    return result, text, page


def test_the_report_has_a_language_ordered_headings_and_unique_ids(report):
    _, text, page = report
    assert page.tags[0] == ("html", {"lang": "en"})
    assert page.headings[0] == 1 and page.headings.count(1) == 1
    assert all(b - a <= 1 for a, b in zip(page.headings, page.headings[1:])), page.headings
    assert len(page.ids) == len(set(page.ids)), "duplicate ids"
    assert "<b>ada" not in text and "&lt;b&gt;ada" in text, "a student id was not escaped"
    for tag, attrs in page.tags:
        if tag == "a" and attrs.get("href", "").startswith("#"):
            assert attrs["href"][1:] in page.ids, f"link to a missing anchor {attrs['href']}"


def test_the_reports_tables_have_captions_and_column_headers(report):
    _, text, _ = report
    tables = re.findall(r"<table>(.*?)</table>", text, flags=re.S)
    assert len(tables) >= 3
    for table in tables:
        assert table.startswith("<caption>"), table[:80]
        header = re.search(r"<thead><tr>(.*?)</tr></thead>", table).group(1)
        assert re.fullmatch(r'(<th scope="col">[^<]+</th>)+', header), header


def test_the_code_panels_are_labelled_focusable_regions_and_marks_are_numbered(report):
    result, text, page = report
    panels = [attrs for tag, attrs in page.tags if attrs.get("class") == "code"]
    assert len(panels) == 2 * len(result.flagged) > 0
    for attrs in panels:
        assert attrs.get("tabindex") == "0" and attrs.get("role") == "region" and attrs.get("aria-label"), attrs
    landmarks = [attrs.get("aria-label") or attrs.get("aria-labelledby") for tag, attrs in page.tags
                 if attrs.get("role") == "region" or (tag == "section" and attrs.get("aria-labelledby"))]
    assert len(landmarks) == len(set(landmarks)), "two regions with one name"
    for side in re.findall(r'<div class="code".*?</div>', text, flags=re.S):
        marks = re.findall(r"<mark>(.*?)</mark>", side, flags=re.S)
        assert marks and marks[0].startswith('<span class="tag"><span class="sr-only">match </span>'), marks[:1]
    style = re.search(r"<style>(.*?)</style>", text, flags=re.S).group(1)
    mark_rule = re.search(r"\bmark\{([^}]*)\}", style).group(1)
    assert "text-decoration:underline" in mark_rule, "marks told apart by colour alone"


@pytest.mark.parametrize("role", sorted(COLOURS))
def test_the_reports_colours_have_aa_contrast_and_are_the_ones_it_uses(role, report):
    foreground, background = COLOURS[role]
    assert contrast(foreground, background) >= 4.5, f"{role}: {foreground} on {background}"
    style = re.search(r"<style>(.*?)</style>", report[1], flags=re.S).group(1)
    assert foreground in style and background in style


# ---- the command ----

def test_the_command_writes_both_files_and_says_where(tmp_path, capsys):
    course = _course(tmp_path)
    own = samples.independent_submissions(course, A1)
    write_graded(course, A1, {"ada": own[0], "bob": samples.disguised_copy(course, A1, own[0]), "cy": own[1],
                              "dee": samples.release_notebook(course, A1)})
    assert main(["similarity", A1, "--course-dir", str(course.grading_dir)]) == 0
    out = capsys.readouterr().out
    assert "3 submissions compared (3 pairs)" in out and "1 pairs at 50% or more" in out
    assert "not compared: dee: no code of its own" in out
    assert (course.grading_dir / "similarity" / f"{A1}.html").is_file()
    assert (course.grading_dir / "similarity" / f"{A1}.csv").is_file()
    assert main(["similarity", A1, "--course-dir", str(course.grading_dir), "--threshold", "101"]) == 0
    assert "0 pairs at 101% or more" in capsys.readouterr().out


def test_the_command_before_any_autograde_says_so(tmp_path):
    with pytest.raises(SystemExit, match="run autograde first"):
        main(["similarity", A1, "--course-dir", str(tmp_path / "course")])


def test_the_commands_help_states_the_defaults_it_uses(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["similarity", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"(default {THRESHOLD:g})" in text and f"(default {MIN_TOKENS}," in text


# ---- through the real pipeline ----

@pytest.mark.kernel
@pytest.mark.sandbox
def test_autograded_submissions_and_a_groups_file_are_what_is_compared(tmp_path):
    """Graded in sandboxed kernels (a group's file with --groups): the disguised copy still earns
    every point, and it is the one pair flagged."""
    from grader.autograde import autograde
    from grader.submission import Options, Status
    own = samples.independent_submissions(COURSE, A1)
    folder = tmp_path / "download"
    folder.mkdir()
    files = {"ada": own[0], "team7": own[1], "dan": samples.disguised_copy(COURSE, A1, own[1]), "eve": own[2]}
    for name, nb in files.items():
        nbformat.write(nb, str(folder / f"{name}.ipynb"))
    groups = tmp_path / "groups.csv"
    groups.write_text("group,student\nTeam 7,bob\nTeam 7,cy\n")
    course = _course(tmp_path)
    graded = autograde(course, A1, folder, Options(progress=False, workers=2, lms="folder", groups=str(groups)))
    scores = {s.student: (s.status, s.score, s.max_score) for s in graded}
    assert set(scores) == {"ada", "bob", "cy", "dan", "eve"}
    assert {status for status, _, _ in scores.values()} == {Status.GRADED}
    assert len({(score, top) for _, score, top in scores.values()}) == 1 and scores["dan"][1] == scores["dan"][2], \
        f"every submission, the disguised copy included, should earn full marks: {scores}"
    result = check_similarity(course, A1)
    assert sorted(w.name for w in result.works) == ["ada", "dan", "eve", "group Team 7"]
    assert _flagged(result) == {frozenset(("dan", "group Team 7"))}
