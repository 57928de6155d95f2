"""No LMS: {student}.ipynb, {student}_{assignment}.ipynb or {student}/[{folders}/]{any}.ipynb."""
from .base import SAFE_ID, Found, LmsFormat


def read_name(relative, path, assignment_id, zone=None):
    """No LMS: the student is the file's name (less the assignment id) or the top folder's."""
    parts = relative.parts
    if len(parts) == 1:
        if relative.suffix != ".ipynb":     # a stray README beside the notebooks names nobody
            return None
        stem = relative.stem.replace(assignment_id, "").strip("_- ") or relative.stem
        return Found(path, login=SAFE_ID.sub("_", stem), preset="folder")
    inner = parts[1:] if len(parts) == 2 or parts[1] != assignment_id else parts[2:]
    if len(inner) > 1 and relative.suffix not in (".ipynb", ".zip"):
        return None                     # a student's data files deep in their folder are not attempts
    return Found(path, login=SAFE_ID.sub("_", parts[0]), preset="folder", inside="/".join(inner[:-1]))


FORMAT = LmsFormat("folder", read_name=read_name, auto=True)
