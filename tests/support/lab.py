"""A throwaway JupyterLab 4 server (with nbgrader's extensions) for the browser test.

Layout of the temporary course root (the server's root_dir and cwd):

    <tmp>/nbgrader_config.py      the repo's course config (grader.course.Course.nbgrader_config)
                                  with source = the repo's solutions/, and release/, course
                                  state and gradebook inside <tmp>, so formgrader lists a1..a5
                                  and writes nothing into the repo
    <tmp>/student/a1_self_attention.ipynb   a copy of the a1 release notebook (the student side)

One server serves both sides: nbgrader's Validate handler and formgrader both read the
nbgrader_config.py in the server's cwd. Jupyter's config/data/runtime/settings dirs point into
<tmp>, so the user's ~/.jupyter is neither read nor written. The server runs in its own process
group, bound to 127.0.0.1 with a random token; stop() shuts it down through the REST API and
then kills the whole process group.
"""
import json
import os
import secrets
import signal
import socket
import subprocess
import urllib.request
from pathlib import Path

from .waiting import TimedOut, wait_until

REPO = Path(__file__).resolve().parents[2]
VENV_BIN = REPO / ".venv" / "bin"

LAB_SETTINGS = {
    # every cell stays in the DOM, so the page text can be searched
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    # the test edits the file on disk and reloads it: no autosave racing with that
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    # no "news / check for updates" toast (and no network)
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_course_root(tmp: Path) -> Path:
    root = tmp / "course_root"
    (root / "student").mkdir(parents=True)
    # sqlite cannot create the gradebook in a missing folder; on a fresh clone the repo's
    # course/ (gitignored) is missing too, and formgrader then answers 500
    (root / "course").mkdir()
    (root / "nbgrader_config.py").write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(REPO)!r})\n"
        "from grader.course import Course\n"
        "c = get_config()  # noqa: F821\n"
        f"Course({str(REPO)!r}, grading_dir={str(root / 'course')!r}).nbgrader_config(\n"
        f"    c, release_dir={str(root / 'release')!r})\n"
        f"c.CourseDirectory.root = {str(root)!r}\n")
    for name, value in LAB_SETTINGS.items():
        path = tmp / "lab_settings" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    return root


def submit(root: Path, assignment_id, student, nb):
    """What `nbgrader collect` leaves in the course root made above: the assignment in its gradebook
    (as `python -m grader release` records it) and the student's notebook in
    course/submitted/<student>/<id>/ with its timestamp."""
    import nbformat

    from grader.course import Course
    from grader.release import generate_release

    course = Course(REPO, grading_dir=root / "course")
    generate_release(course, assignment_id, root / "release")
    folder = course.grading_dir / "submitted" / student / assignment_id
    folder.mkdir(parents=True)
    nbformat.write(nb, folder / f"{assignment_id}.ipynb")
    (folder / "timestamp.txt").write_text("2026-11-20 10:00:00.000000 UTC")
    return folder


class LabServer:
    def __init__(self, tmp: Path, log_path: Path):
        self.tmp = Path(tmp)
        self.root = make_course_root(self.tmp)
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self.proc = None

    def url(self, path):
        sep = "&" if "?" in path else "?"
        return f"{self.base}/{path.lstrip('/')}{sep}token={self.token}"

    def start(self, timeout=90):
        env = dict(os.environ)
        env.pop("MPLBACKEND", None)   # the kernels must draw inline plots, whatever ran before
        env.update(
            PATH=f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}",
            JUPYTER_CONFIG_DIR=str(self.tmp / "jupyter_config"),
            JUPYTER_RUNTIME_DIR=str(self.tmp / "jupyter_runtime"),
            JUPYTERLAB_SETTINGS_DIR=str(self.tmp / "lab_settings"),
            JUPYTERLAB_WORKSPACES_DIR=str(self.tmp / "lab_workspaces"),
            IPYTHONDIR=str(self.tmp / "ipython"),
            OMP_NUM_THREADS="1",
        )
        cmd = [str(VENV_BIN / "python"), "-m", "jupyter", "lab", "--no-browser",
               "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={self.port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={self.token}",
               f"--ServerApp.root_dir={self.root}", "--ServerApp.open_browser=False",
               *(["--allow-root"] if os.geteuid() == 0 else []),
               "--LabApp.check_for_updates_class="
               "jupyterlab.NeverCheckForUpdate"]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        def answers():
            try:
                with urllib.request.urlopen(self.url("api/status"), timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        try:
            wait_until(answers, timeout, "jupyter lab to answer", interval=0.5,
                       stop_early=lambda: self.proc.poll() is not None)
        except TimedOut:
            raise RuntimeError(f"jupyter lab did not answer in {timeout}s (exit status {self.proc.poll()}); "
                               f"log:\n{self.log_path.read_text()[-3000:]}") from None
        return self

    def stop(self):
        if self.proc is None:
            return
        try:
            if self.proc.poll() is None:
                # shuts down the kernels (their own sessions) and then the server
                req = urllib.request.Request(self.url("api/shutdown"), method="POST", data=b"")
                try:
                    urllib.request.urlopen(req, timeout=5).close()
                except OSError:
                    pass
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(timeout=5)
                    break
                except subprocess.TimeoutExpired:
                    continue
            self.log.close()
            self.proc = None
