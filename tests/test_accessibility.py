"""Every HTML page the grader writes meets WCAG 2.1 A and AA as axe-core checks it in Chromium
(docs/accessibility.md): a student's feedback page (an assignment's, a debugging lab's), the class
report (an assignment's, a lab's) and the similarity report, each made from real grading data (a1
and debug_a1 graded without kernels, as tests/test_feedback.py does), and the README `publish`
writes; each page at a desktop's and a phone's width. Needs Chromium, Playwright and
axe-playwright-python (requirements-test.txt); without them those tests skip (REQUIRE_BROWSER=1
fails instead). The colours' contrast is checked without a browser."""
import os
import re

import nbformat
import pytest
from nbconvert.filters import markdown2html

from grader import cells, pipeline, samples
from grader.feedback import generate_feedback
from grader.feedback_html import CODE_BACKGROUND, COLOURS, CodeStyle, page_css
from grader.labs import lab_bugs
from grader.mutants import load_catalogue
from grader.publish import released_ids, student_readme
from grader.report import build_report, save_outcomes
from grader.similarity import check_similarity
from grader.submission import Options, Submission
from support.accessibility import Checker, contrast, describe
from support.grading import A1, execute_in_process, grade_without_kernel
from support.pages import WRITTEN_ANSWER
from support.similarity import write_graded

LAB = "debug_a1"
AA = 4.5      # WCAG 1.4.3: normal text



# ---- without a browser: the colours ----

def _hex(colour):
    """"#rgb" or "#rrggbb", any case, as "#rrggbb"."""
    colour = colour.lower()
    return "#" + "".join(c * 2 for c in colour[1:]) if len(colour) == 4 else colour


def _code_colours(css):
    """Every text colour the page's CSS gives highlighted code."""
    rule = r"^\.highlight[^{]*\{[^}]*?(?<![-\w])color:\s*(#[0-9a-fA-F]{3,6})\b"
    return {_hex(colour) for colour in re.findall(rule, css, re.M)}


@pytest.mark.parametrize("background", [CODE_BACKGROUND, "#ffffff"])
def test_every_code_colour_has_aa_contrast_on_the_codes_backgrounds(background):
    """The feedback page's code sits on bootstrap's grey; nbgrader's graded cells are white around it."""
    colours = _code_colours(page_css())
    assert len(colours) > 10
    weak = {c: round(contrast(c, background), 2) for c in colours if contrast(c, background) < AA}
    assert not weak, f"below {AA}:1 on {background}: {weak}"


def test_the_code_colours_are_the_code_styles():
    assert _code_colours(page_css()) == {_hex("#" + d["color"]) for _, d in CodeStyle if d["color"]}


@pytest.mark.parametrize("role", sorted(COLOURS))
def test_every_text_colour_the_page_sets_has_aa_contrast(role):
    foreground, background = COLOURS[role]
    assert contrast(foreground, background) >= AA, f"{role}: {foreground} on {background}"
    assert foreground in page_css() and background in page_css()


def test_links_are_underlined():
    assert re.search(r"^a, a:hover, a:focus \{[^}]*text-decoration: underline", page_css(), re.M)


# ---- in a browser: every page axe-core finds nothing on ----

# `publish` writes the students' README in Markdown, which their Git host renders in its own page: what is
# checked is the README's own content (image descriptions, table headers, link text), rendered by the
# Markdown renderer nbconvert uses into a bare page
STANDALONE = """<!doctype html><html lang="en"><meta charset="utf-8"><title>the course</title>
<body><main>{}</main></body></html>"""

def _figure_png():
    """A small matplotlib figure as PNG (base64), what a plotting cell's output holds."""
    import base64
    import io

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axis = plt.subplots(figsize=(2, 1.5))
    axis.plot([0, 1, 2], [2.5, 1.0, 0.5], "o-")
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return base64.b64encode(buffer.getvalue()).decode()


def _execute_drawing_plots(submission, batch):
    """The execute stage as a kernel that draws the plots would leave it (grading without kernels keeps no
    outputs): execute_in_process, then every cell that calls plt.show() with a figure as its output."""
    submission = execute_in_process(submission, batch)
    png = _figure_png()
    for cell in submission.execution.notebook.cells:
        if cell.cell_type == "code" and "plt.show()" in cell.source:
            cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})]
    return submission


def _grade(course, tmp, assignment_id, notebooks, drawn=()):
    """`notebooks` ({student: notebook}) graded without kernels, their outcomes saved; the students named
    in `drawn` with their plots drawn (_execute_drawing_plots)."""
    batch = pipeline.Batch(course, assignment_id, Options(sandboxed=False, progress=False))
    with batch:
        batch.prepare()
        graded = []
        for student, nb in notebooks.items():
            path = tmp / f"{assignment_id}-{student}.ipynb"
            nbformat.write(nb, str(path))
            submission = Submission(student, path, login=student, preset="folder")
            if student in drawn:
                stages = [_execute_drawing_plots if stage.__name__ == "execute" else stage for stage in pipeline.GRADE]
                submission = pipeline.grade(submission, batch, stages=stages)
            else:
                submission = grade_without_kernel(submission, batch)
            graded.append(pipeline.record(submission, batch))
        save_outcomes(batch.course, assignment_id, graded)


def write_pages(course, tmp):
    """{kind: page}: the pages of two a1 students (one wrote an answer with a table and a link and had her
    plots drawn, one left a bug) and of a lab's student who fixed one bug of its catalogue, both class reports, and the
    similarity report of a2 with a disguised copy."""
    graded = course.with_grading_dir(tmp / "course")
    answered = samples.perfect_submission(graded, A1)
    for cell in answered.cells:
        if cells.grade_id(cell) == "written_permutation":
            cell.source = WRITTEN_ANSWER
    buggy = samples.buggy_submission(graded, A1, load_catalogue(graded, A1)[0].name)[0]
    _grade(graded, tmp, A1, {"ada": answered, "bob": buggy}, drawn={"ada"})
    [ada, bob] = generate_feedback(graded, A1)
    assert ada.read_text().count("data:image/png") >= 2, "ada's page shows the figures of a1's plotting cells"
    bugs = [bug.name for bug in lab_bugs(graded, LAB)]
    _grade(graded, tmp, LAB, {"cy": samples.lab_submission(graded, LAB, bugs[1:])})
    [lab] = generate_feedback(graded, LAB)

    own = samples.independent_submissions(graded, "a2_multihead_masking")
    write_graded(graded, "a2_multihead_masking",
                 {"ada": own[1], "bob": samples.disguised_copy(graded, "a2_multihead_masking", own[1]), "cy": own[2]})
    similarity = check_similarity(graded, "a2_multihead_masking").html_path
    readme = tmp / "published-readme.html"
    readme.write_text(STANDALONE.format(markdown2html(student_readme(course, released_ids(course)))))
    return {"feedback (answer)": ada, "feedback (bug)": bob, "lab feedback": lab,
            "class report": build_report(graded, A1), "lab class report": build_report(graded, LAB),
            "similarity report": similarity, "published README": readme}


@pytest.fixture(scope="module")
def pages(course, tmp_path_factory):
    return write_pages(course, tmp_path_factory.mktemp("accessible"))


@pytest.fixture(scope="module")
def checker():
    """Chromium with axe-core; axe-playwright-python missing skips like a missing browser does."""
    try:
        import axe_playwright_python  # noqa: F401
    except ImportError:
        why = "axe-playwright-python is not installed (pip install -r requirements-test.txt -c constraints.txt)"
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail(f"REQUIRE_BROWSER=1 but {why}", pytrace=False)
        pytest.skip(f"needs Chromium and Playwright: {why}")
    with Checker() as found:
        yield found


KINDS = ["feedback (answer)", "feedback (bug)", "lab feedback", "class report", "lab class report",
         "similarity report", "published README"]


@pytest.mark.browser
@pytest.mark.parametrize("kind", KINDS)
def test_the_page_has_no_wcag_violation(kind, pages, checker):
    violations = checker.violations(pages[kind])
    assert not violations, (f"{kind} ({pages[kind].name}): {sum(len(v['nodes']) for v in violations)} elements "
                            f"fail WCAG 2.1 A/AA\n{describe(violations)}")


@pytest.mark.browser
def test_the_figures_on_a_feedback_page_are_described(pages):
    """axe's image-alt passes any alt, nbconvert's own placeholder for an image without one too ("No description
    has been provided for this image"): each figure's alt must be the "Figure:" text that follows its cell."""
    from html.parser import HTMLParser

    images = []
    parser = HTMLParser()
    parser.handle_starttag = lambda tag, attrs: images.append(dict(attrs)) if tag == "img" else None
    parser.feed(pages["feedback (answer)"].read_text())
    figures = [image for image in images if image.get("src", "").startswith("data:image/png")]
    assert len(figures) >= 2, f"a1's plotting cells drew {len(figures)} figures on the page"
    for image in figures:
        assert image.get("alt", "").startswith("Figure: "), f"a figure's alt is not its description: {image.get('alt')!r}"
