"""Files of a submission that stay inside it.

A submission is a folder the grader reads: a student's Gradescope upload, a GitHub Classroom
folder read as files, an LMS download given as a folder, nbgrader's submitted/ or exchange folder,
a plain folder of notebooks. A file in it that is a symbolic link, or that lies below a folder that
is one, may point anywhere the grader can read (the answer key, another student's notebook), so it
is never read, whatever it points to; the student's row says why in words. Zips are unpacked by
the grader itself, which never makes a link (grader/stages/collect.py), and git repositories are
read through git, where a committed link is an object holding its target's name, never followed
(grader/classroom.py)."""
import os
import posixpath
from pathlib import Path

NOT_READ = "links are never read: submit the notebook file itself"


def link_reason(path, top, shown=None):
    """None when `path` is a file inside the folder `top` reached through no link; else why it is
    not read, for the table: "a1.ipynb is a link to a file outside the submission (...)". `shown`:
    how to name the file (default: its path below `top`)."""
    path, top = Path(path), Path(top)
    try:
        relative = path.relative_to(top)
    except ValueError:
        return f"{shown or path} is outside the submission"
    shown = shown or relative.as_posix()
    real_top = top.resolve()
    current = top
    for part in relative.parts:
        current = current / part
        if current.is_symlink():
            where = _where(current, real_top)
            if current == path:
                return f"{shown} is a link to {where} ({NOT_READ})"
            return f"{shown} is in {current.relative_to(top).as_posix()}/, a link to {where} ({NOT_READ})"
    if not _inside(path.resolve(), real_top):       # a mount or a bind mount: nothing a submission makes
        return f"{shown} resolves to a file outside the submission ({NOT_READ})"
    return None


def committed_link_reason(name, target, commit):
    """Why a notebook that a git commit holds as a link (mode 120000, its blob the target's name) is
    not read: `name` its path in the repository, `target` the link's text."""
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(name), target))
    outside = posixpath.isabs(target) or joined == ".." or joined.startswith("../")
    where = "a file outside the repository" if outside else "another file of the repository"
    return f"{name} is a link to {where} in commit {commit[:7]} ({NOT_READ})"


def _where(link, real_top):
    """What a link points to, in words: "a file outside the submission", "another folder of the
    submission", "nothing"."""
    try:
        target = link.resolve()
        kind = "folder" if target.is_dir() else "file" if target.exists() else None
    except (OSError, RuntimeError):             # a loop of links, a target that cannot be looked at
        return "a file outside the submission"
    if kind is None:
        return "nothing"
    return f"another {kind} of the submission" if _inside(target, real_top) else f"a {kind} outside the submission"


def _inside(path, real_top):
    return path == real_top or str(path).startswith(str(real_top).rstrip(os.sep) + os.sep)
