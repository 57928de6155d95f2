"""Start the course's JupyterHub on 127.0.0.1 (what `make hub` runs; tests/test_hub.py uses the same
code). Run as root after deploy/jupyterhub/install.sh:

    python3 deploy/jupyterhub/hub.py [--port 8000] [--reset]

It prepares nbgrader's exchange (the shared folder, one folder per course that only the course's
members can enter), puts a copy of this repository in each course's grader account
(~grader-<course>/<course>: solutions/, assignments/, the grader; course/ is where grading
happens), writes one random password per account, starts JupyterHub with each course's Formgrader
as a service (/services/<course>/), prints the URL and the logins, and runs until Ctrl-C.

    python3 deploy/jupyterhub/hub.py as USER [--cwd DIR] -- COMMAND ...

runs COMMAND as a hub user, as their terminal on the hub would (the test uses it). Only the
standard library: any python3 can run this file; JupyterHub itself runs from the hub environment.
"""
import argparse
import grp
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
DEFAULT_ENV = Path(os.environ.get("COURSE_HUB_ENV", "/opt/attention-course/venv"))
DEFAULT_EXCHANGE = Path("/srv/nbgrader/exchange")
MARKER = "attention-course hub"           # users.sh puts it in the accounts' comment field
ROLES = ("grader", "instructor", "ta", "student")


class HubNotReady(RuntimeError):
    """Something install.sh provides is missing (the message says what and how to get it)."""


def accounts():
    """{login: (role, course id)} from users.txt, in file order."""
    found = {}
    for number, line in enumerate((HERE / "users.txt").read_text().splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 3 or fields[1] not in ROLES:
            raise ValueError(f"users.txt line {number}: expected 'login role course', the role one of "
                             f"{', '.join(ROLES)}; got {line.strip()!r}")
        found[fields[0]] = (fields[1], fields[2])
    return found


def users():
    """{login: role} from users.txt, in file order."""
    return {login: role for login, (role, _) in accounts().items()}


def courses():
    """The course ids of users.txt, in file order."""
    return list(dict.fromkeys(course for _, course in accounts().values()))


def course_of(user):
    return accounts()[user][1]


def members(course, *roles):
    """The logins of a course with one of these roles (all roles when none is named)."""
    return [login for login, (role, of) in accounts().items() if of == course and (not roles or role in roles)]


def grader_account(course):
    """The course's shared grader account: it owns the course and runs its Formgrader service."""
    found = members(course, "grader")
    if len(found) != 1:
        raise ValueError(f"users.txt: course {course!r} needs exactly one account with the role grader, "
                         f"found {found or 'none'}")
    return found[0]


def course_group(course):
    """The system group of a course's members: the only ones who may enter its exchange folder."""
    return f"nbgrader-{course}"


def instructor():
    return next(name for name, role in users().items() if role == "instructor")


def students(course=None):
    return [name for name, (role, of) in accounts().items() if role == "student" and course in (None, of)]


def home(user):
    return Path(pwd.getpwnam(user).pw_dir)


def missing_parts(hub_env=DEFAULT_ENV, need_root=True, check_accounts=True):
    """What stops the hub from starting here, each with the command that fixes it ([] = ready);
    check_accounts=False leaves out the accounts and groups (users.sh makes them)."""
    fix = "run: sudo deploy/jupyterhub/install.sh"
    problems = []
    if need_root and os.geteuid() != 0:
        problems.append("the hub must run as root (it starts each user's server as that user)")
    if not (hub_env / "bin" / "jupyterhub").exists():
        problems.append(f"no JupyterHub in the hub environment {hub_env} ({fix})")
    if shutil.which("configurable-http-proxy") is None:
        problems.append(f"configurable-http-proxy is not on PATH ({fix})")
    for course in courses() if check_accounts else []:
        try:
            grp.getgrnam(course_group(course))
        except KeyError:
            problems.append(f"no system group {course_group(course)!r} ({fix})")
    for user in users() if check_accounts else []:
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            problems.append(f"no system user {user!r} ({fix})")
            continue
        if not entry.pw_gecos.startswith(MARKER):
            problems.append(f"the system user {user!r} was not made by deploy/jupyterhub/users.sh")
    return problems


def as_user_argv(user, argv, env=None, hub_env=DEFAULT_ENV):
    """argv run as a hub user (runuser), with only that user's HOME, the hub environment on PATH
    and `env`: what the user's own terminal on the hub would have."""
    base = {"HOME": str(home(user)), "USER": user, "LOGNAME": user, "LANG": "C.UTF-8",
            "PATH": f"{hub_env / 'bin'}:/usr/local/bin:/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    if user in accounts():       # the course id the hub gives that user's server
        base["GRADER_COURSE_ID"] = course_of(user)
    return ["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in {**base, **(env or {})}.items()),
            *map(str, argv)]


def run_as(user, argv, cwd=None, env=None, hub_env=DEFAULT_ENV, timeout=600, check=True):
    """Run argv as a hub user; returns the CompletedProcess (text), raises when check and it fails."""
    command = as_user_argv(user, argv, env=env, hub_env=hub_env)
    result = subprocess.run(command, cwd=cwd or "/", capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise RuntimeError(f"as {user}: {' '.join(map(str, argv))} exited {result.returncode}:\n"
                           f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}")
    return result


def prepare_exchange(root, reset=False):
    """nbgrader's exchange: the root world-writable with the sticky bit (anyone creates, nobody
    removes another's files); each course's folder made up front, owned by the course's grader
    account (so no student can claim the course id first), group the course's members, mode 0750:
    a student of another course cannot even list it. nbgrader itself makes inbound/ (2733: students
    write, nobody lists), outbound/ (755) and feedback/ (711) inside when the course releases."""
    root = Path(root)
    if reset and root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    for parent in [root.parent, *root.parent.parents]:    # every user must reach the exchange
        mode = parent.stat().st_mode
        if not mode & 0o001:
            raise HubNotReady(f"{parent} is not traversable by other users (mode {oct(mode & 0o777)}): "
                              "put the exchange somewhere every hub user can reach")
    os.chmod(root, 0o1777)
    for course in courses():
        folder = root / course
        folder.mkdir(exist_ok=True)
        os.chown(folder, pwd.getpwnam(grader_account(course)).pw_uid, grp.getgrnam(course_group(course)).gr_gid)
        os.chmod(folder, 0o750)
    return root


def install_students_config(hub_env=DEFAULT_ENV):
    """The hub environment's nbgrader configuration (install.sh step 3), brought up to this folder's
    nbgrader_config_students.py when it differs (a hub installed from an older checkout)."""
    target = Path(hub_env) / "etc" / "jupyter" / "nbgrader_config.py"
    wanted = (HERE / "nbgrader_config_students.py").read_bytes()
    if not target.exists() or target.read_bytes() != wanted:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(wanted)
        os.chmod(target, 0o644)
    return target


def _course_files(repo):
    """The repository's files as git sees them (tracked, and new files not ignored): no venv,
    no grading artefacts, no out/."""
    try:
        listing = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others",
                                  "--exclude-standard"], capture_output=True, check=True).stdout
        return [Path(p.decode()) for p in listing.split(b"\0") if p]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", "out", "course", "__pycache__", ".ipynb_checkpoints", "state"}
        return [p.relative_to(repo) for p in repo.rglob("*")
                if p.is_file() and not skip & set(p.relative_to(repo).parts)]


def course_folder(course):
    """Where a course lives on the hub: ~grader-<course>/<course>."""
    return home(grader_account(course)) / course


def install_course(course, repo=REPO, reset=False):
    """Copy the repository into the course's grader account, ~grader-<course>/<course> (kept if it is
    there, unless reset), owned by that account, private to it (its home is 0700)."""
    user = grader_account(course)
    target = course_folder(course)
    if target.exists() and not reset:
        return target
    if target.exists():
        shutil.rmtree(target)
    for rel in _course_files(repo):
        source = repo / rel
        if source.is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / rel)
    entry = pwd.getpwnam(user)
    for path in [target, *target.rglob("*")]:
        os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
    return target


def reset_students():
    """Remove what earlier runs left in the students' homes: fetched assignments, feedback,
    nbgrader's record of submissions (~/.local/share/jupyter/nbgrader_cache); and every hub user's
    saved JupyterLab layout (open tabs, terminals)."""
    from_source = [p.name for p in (REPO / "solutions").iterdir() if p.is_dir()]
    for user in students():
        for name in [*from_source, ".local/share/jupyter/nbgrader_cache", ".local/share/jupyter/runtime"]:
            shutil.rmtree(home(user) / name, ignore_errors=True)
    for user in users():
        shutil.rmtree(home(user) / ".jupyter" / "lab" / "workspaces", ignore_errors=True)


def passwords(state, fixed=None):
    """One random password per account, kept in STATE/passwords.json (root only) so that a restarted
    hub keeps the same logins; fixed={user: password} replaces them (the test's own)."""
    path = Path(state) / "passwords.json"
    current = json.loads(path.read_text()) if path.exists() else {}
    people = [user for user, role in users().items() if role != "grader"]   # nobody logs in as a grader account
    wanted = {user: (fixed or {}).get(user) or current.get(user) or secrets.token_urlsafe(9) for user in people}
    if wanted != current:
        path.write_text(json.dumps(wanted, indent=1))
    os.chmod(path, 0o600)
    return wanted


class Hub:
    """JupyterHub (and its proxy) as a child process group on 127.0.0.1."""

    def __init__(self, state, port=8000, exchange=DEFAULT_EXCHANGE, hub_env=DEFAULT_ENV, log_path=None,
                 api_port=None, proxy_api_port=None, service_port=None):
        self.state = Path(state)
        self.port, self.exchange, self.hub_env = port, Path(exchange), Path(hub_env)
        self.api_port = api_port or port + 1
        self.proxy_api_port = proxy_api_port or port + 2
        self.service_port = service_port or port + 3    # the courses' services: this one and the next ones
        self.log_path = Path(log_path) if log_path else self.state / "jupyterhub.log"
        self.url = f"http://127.0.0.1:{port}"
        self.proc = None
        self.startup_s = None

    def environment(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("JUPYTER", "MPL", "COURSE_HUB"))}
        env.update(COURSE_HUB_STATE=str(self.state), COURSE_HUB_ENV=str(self.hub_env),
                   COURSE_HUB_EXCHANGE=str(self.exchange), COURSE_HUB_PORT=str(self.port),
                   COURSE_HUB_API_PORT=str(self.api_port), COURSE_HUB_PROXY_API_PORT=str(self.proxy_api_port),
                   COURSE_HUB_SERVICE_PORT=str(self.service_port),
                   PATH=f"{self.hub_env / 'bin'}:{env.get('PATH', '/usr/bin:/bin')}")
        return env

    def start(self, timeout=90):
        problems = missing_parts(self.hub_env)
        if problems:
            raise HubNotReady("; ".join(problems))
        self.state.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state, 0o700)
        started = time.monotonic()
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [str(self.hub_env / "bin" / "jupyterhub"), "-f", str(HERE / "jupyterhub_config.py")],
            cwd=self.state, env=self.environment(), stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True)
        deadline = started + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyterhub exited with {self.proc.returncode}; its log "
                                   f"({self.log_path}):\n{self.log_path.read_text()[-4000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/hub/api/", timeout=2) as response:
                    if response.status == 200:
                        self.startup_s = time.monotonic() - started
                        return self
            except OSError:
                time.sleep(0.25)
        self.stop()
        raise RuntimeError(f"JupyterHub did not answer on {self.url} within {timeout} s; its log "
                           f"({self.log_path}):\n{self.log_path.read_text()[-4000:]}")

    def stop(self, timeout=90):
        """SIGTERM: JupyterHub stops the courses' services, the users' servers and its proxy
        (cleanup_servers), then exits (it sends each server SIGINT, which stops it in a second or
        two; SIGTERM only after 30 s, its interrupt_timeout); whatever is left of its process group,
        and of the servers it started (each in a session of its own), is killed."""
        if self.proc is None:
            return
        started = _descendants(self.proc.pid)
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
                try:
                    self.proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    pass
        finally:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            for pid in started:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            self.proc.wait()
            self.log.close()
            self.proc = None


def _descendants(pid):
    """The pids below pid (its children, theirs, ...), read from /proc."""
    children = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo += children.get(child, [])
    return found


def main_as(argv):
    """`hub.py as USER [--cwd DIR] [--env K=V ...] -- COMMAND ...`: run COMMAND as a hub user (what
    that user's terminal on the hub would do), stdin and stdout passed through; exits with its status."""
    parser = argparse.ArgumentParser(prog="hub.py as", description=main_as.__doc__.split(":")[0])
    parser.add_argument("user", choices=[*users(), "root"])
    parser.add_argument("--cwd", default=None, help="working directory (default: the user's home)")
    parser.add_argument("--env", action="append", default=[], metavar="K=V")
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        parser.error("no command given (hub.py as USER [options] -- COMMAND ...)")
    split = argv.index("--")
    args, command = parser.parse_args(argv[:split]), argv[split + 1:]
    env = dict(item.split("=", 1) for item in args.env)
    return subprocess.run(as_user_argv(args.user, command, env=env), cwd=args.cwd or home(args.user)).returncode


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["as"]:
        return main_as(argv[1:])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8000, help="public port on 127.0.0.1 (the hub's API, "
                        "the proxy's API and the courses' services use the next ones)")
    parser.add_argument("--state", default=str(HERE / "state"), help="JupyterHub's database, cookie secret, "
                        "passwords and log (default deploy/jupyterhub/state/)")
    parser.add_argument("--exchange", default=str(DEFAULT_EXCHANGE), help="nbgrader's exchange root")
    parser.add_argument("--env", default=str(DEFAULT_ENV), help="the hub environment (install.sh)")
    parser.add_argument("--reset", action="store_true", help="start the course afresh: empty exchange, a new "
                        "copy of the repository for the instructor, students' fetched work removed")
    parser.add_argument("--passwords-file", help="JSON {login: password} to use instead of random ones")
    parser.add_argument("--log", help="JupyterHub's log file (default STATE/jupyterhub.log)")
    args = parser.parse_args(argv)
    hub = Hub(args.state, port=args.port, exchange=args.exchange, hub_env=Path(args.env), log_path=args.log)
    problems = missing_parts(hub.hub_env)
    if problems:
        print("make hub: the hub is not installed here:\n  - " + "\n  - ".join(problems), file=sys.stderr)
        return 2
    Path(args.state).mkdir(parents=True, exist_ok=True)
    install_students_config(hub.hub_env)
    prepare_exchange(args.exchange, reset=args.reset)
    folders = {course: install_course(course, reset=args.reset) for course in courses()}
    if args.reset:
        reset_students()
    logins = passwords(args.state, json.loads(Path(args.passwords_file).read_text()) if args.passwords_file else None)
    hub.start()
    print(f"JupyterHub for {', '.join(courses())} is up at {hub.url}/ (started in {hub.startup_s:.1f} s; "
          f"log: {hub.log_path})", flush=True)
    for user, password in logins.items():
        role, course = accounts()[user]
        if role != "grader":
            print(f"  {role:10s}  {course:20s}  login {user:12s}  password {password}")
    for course, folder in folders.items():
        graders = ", ".join(members(course, "instructor", "ta")) or "nobody"
        print(f"  course {course}: {folder} (grade there: python -m grader autograde ...), its Formgrader "
              f"{hub.url}/services/{course}/formgrader for {graders}")
    print(f"The exchange is {args.exchange}. Ctrl-C stops the hub and every user's server.", flush=True)
    stop = {"now": False}
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        while not stop["now"] and hub.proc.poll() is None:
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        hub.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
