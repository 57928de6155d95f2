"""Stage 1: find one notebook per student in whatever the instructor was given."""
import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Submission:
    student: str
    path: Path | None          # the notebook to grade; None when there is nothing to grade
    problem: str | None = None  # why it cannot be graded
    note: str | None = None     # something the instructor should know (e.g. renamed file)


_SAFE_ID = re.compile(r"[^A-Za-z0-9_.@-]+")


def student_id_from_filename(stem, assignment_id):
    """'alice_a1_self_attention' or 'alice' -> 'alice' (an LMS often appends the file name)."""
    stem = stem.replace(assignment_id, "").strip("_- ") or stem
    return _SAFE_ID.sub("_", stem)


def collect(assignment_id, source, workspace=None):
    """Submissions found in `source`: a folder of notebooks (one per student), nbgrader's
    submitted layout (<student>/<assignment>/<assignment>.ipynb) or a .zip of either."""
    source = Path(source)
    if not source.exists():
        raise FileNotFoundError(f"no such file or folder: {source}")
    if source.is_file():
        if not zipfile.is_zipfile(source):
            raise ValueError(f"{source} is neither a folder nor a zip archive")
        target = Path(workspace or tempfile.mkdtemp(prefix="submissions-"))
        with zipfile.ZipFile(source) as archive:
            for member in archive.namelist():   # never write outside the target (zip slip)
                if member.startswith("/") or ".." in Path(member).parts:
                    raise ValueError(f"unsafe path in zip: {member}")
            archive.extractall(target)
        source = _single_top_folder(target)
    found = {}
    for entry in sorted(source.iterdir()):
        if entry.name.startswith((".", "__MACOSX")):
            continue
        if entry.is_file() and entry.suffix == ".ipynb":
            student = student_id_from_filename(entry.stem, assignment_id)
            found[student] = _unique(found, student, Submission(student, entry))
        elif entry.is_dir():
            found[entry.name] = _from_student_folder(entry, assignment_id)
    return list(found.values())


def _from_student_folder(folder, assignment_id):
    student = _SAFE_ID.sub("_", folder.name)
    inner = folder / assignment_id if (folder / assignment_id).is_dir() else folder
    expected = inner / f"{assignment_id}.ipynb"
    if expected.exists():
        return Submission(student, expected)
    notebooks = sorted(p for p in inner.glob("*.ipynb") if not p.name.startswith("."))
    if len(notebooks) == 1:
        return Submission(student, notebooks[0],
                          note=f"notebook was renamed to {notebooks[0].name}; graded as {expected.name}")
    if not notebooks:
        return Submission(student, None, problem=f"no {expected.name} in the submission")
    names = ", ".join(p.name for p in notebooks)
    return Submission(student, None, problem=f"no {expected.name}, and several other notebooks ({names})")


def _unique(found, student, submission):
    if student in found:
        submission.note = f"several files for {student}; graded {submission.path.name}"
    return submission


def _single_top_folder(folder):
    entries = [e for e in folder.iterdir() if not e.name.startswith((".", "__MACOSX"))]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() and not any(
        e.suffix == ".ipynb" for e in entries) and not (entries[0] / "submitted").exists() else folder
