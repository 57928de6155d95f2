"""GitHub Classroom: {slug}-submissions/{slug}-{github username}/, a git repository each, as
`gh classroom clone student-repos` writes it (github/gh-classroom, cmd/gh-classroom/clone/student-repos).
Read by grader/classroom.py (collect), not by a file-name reader, since the notebook and its time
come from the repository's commits."""
from .base import LmsFormat

FORMAT = LmsFormat("classroom", user="GitHub user", auto=False)
