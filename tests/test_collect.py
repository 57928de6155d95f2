import zipfile

import nbformat

from grader.stages.collect import collect


def _nb(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nbformat.v4.new_notebook(), str(path))


def test_folder_of_files_with_lms_names(tmp_path):
    _nb(tmp_path / "alice.ipynb")
    _nb(tmp_path / "bob_a1_self_attention.ipynb")
    found = {s.student: s for s in collect("a1_self_attention", tmp_path).submissions}
    assert set(found) == {"alice", "bob"}


def test_submitted_layout_missing_and_renamed(tmp_path):
    _nb(tmp_path / "carol" / "a1_self_attention" / "a1_self_attention.ipynb")
    _nb(tmp_path / "dave" / "a1_self_attention" / "my_work.ipynb")
    (tmp_path / "erin" / "a1_self_attention").mkdir(parents=True)
    found = {s.student: s for s in collect("a1_self_attention", tmp_path).submissions}
    assert found["carol"].path.name == "a1_self_attention.ipynb" and found["carol"].problem is None
    assert "renamed" in found["dave"].note
    assert found["erin"].path is None and "no a1_self_attention.ipynb" in found["erin"].problem


def test_zip_from_an_lms(tmp_path):
    _nb(tmp_path / "src" / "frank_a1_self_attention.ipynb")
    archive = tmp_path / "download.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.write(tmp_path / "src" / "frank_a1_self_attention.ipynb", "submissions/frank_a1_self_attention.ipynb")
    [submission] = collect("a1_self_attention", archive, workspace=tmp_path / "unzipped").submissions
    assert submission.student == "frank"


def test_zip_slip_is_refused(tmp_path):
    archive = tmp_path / "evil.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("../outside.ipynb", "{}")
    try:
        collect("a1_self_attention", archive, workspace=tmp_path / "x")
    except ValueError as error:
        assert "unsafe path" in str(error)
    else:
        raise AssertionError("a zip with ../ paths was accepted")
