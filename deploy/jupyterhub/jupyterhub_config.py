# JupyterHub configuration for the course (deploy/jupyterhub/README.md). Started by
# deploy/jupyterhub/hub.py (`make hub`, tests/test_hub.py), which sets the COURSE_HUB_* variables
# below; the hub runs as root and spawns each user's JupyterLab as that local system user.
import json
import os
import shutil
from pathlib import Path
from secrets import compare_digest

from jupyterhub.auth import Authenticator

HERE = Path(__file__).resolve().parent
STATE = Path(os.environ.get("COURSE_HUB_STATE", HERE / "state"))          # db, cookie secret, passwords
HUB_ENV = Path(os.environ.get("COURSE_HUB_ENV", "/opt/attention-course/venv"))
EXCHANGE = os.environ.get("COURSE_HUB_EXCHANGE", "/srv/nbgrader/exchange")
PORT = int(os.environ.get("COURSE_HUB_PORT", "8000"))
HUB_PORT = int(os.environ.get("COURSE_HUB_API_PORT", str(PORT + 1)))     # the hub's own API
PROXY_API_PORT = int(os.environ.get("COURSE_HUB_PROXY_API_PORT", str(PORT + 2)))
SERVICE_PORT = int(os.environ.get("COURSE_HUB_SERVICE_PORT", str(PORT + 3)))   # the courses' services, in turn
# users.txt: login, role, course id
ACCOUNTS = {login: (role, course) for login, role, course in (
    line.split() for line in (HERE / "users.txt").read_text().splitlines()
    if line.strip() and not line.lstrip().startswith("#"))}
COURSES = list(dict.fromkeys(course for _, course in ACCOUNTS.values()))


def members(course, *roles):
    return [login for login, (role, of) in ACCOUNTS.items() if of == course and role in roles]


class CoursePasswordAuthenticator(Authenticator):
    """One password per hub account, read from STATE/passwords.json (root-only, made by hub.py).

    Suited to a test and to trying the course on 127.0.0.1: unlike the shared-password
    authenticator, a student cannot log in as another student. In production use the system's
    passwords (PAM, JupyterHub's default: `c.JupyterHub.authenticator_class = "pam"`) or your
    university's single sign-on (OAuthenticator / LTI), and keep allowed_users."""

    async def authenticate(self, handler, data):
        passwords = json.loads((STATE / "passwords.json").read_text())
        name = self.normalize_username(data["username"])
        want = passwords.get(name)
        if want and compare_digest(data["password"].encode(), want.encode()):
            return name
        return None


c = get_config()  # noqa: F821 - provided by traitlets when it loads this file

# network: everything on 127.0.0.1 (put HTTPS in front of it for a real course: README.md)
c.JupyterHub.bind_url = f"http://127.0.0.1:{PORT}"
c.JupyterHub.hub_bind_url = f"http://127.0.0.1:{HUB_PORT}"
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PROXY_API_PORT}"
c.ConfigurableHTTPProxy.command = [shutil.which("configurable-http-proxy") or "configurable-http-proxy"]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "jupyterhub-proxy.pid")

# state
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")
c.JupyterHub.cleanup_servers = True          # stopping the hub stops the users' servers

# who may log in
c.JupyterHub.authenticator_class = CoursePasswordAuthenticator
c.Authenticator.allowed_users = {login for login, (role, _) in ACCOUNTS.items() if role != "grader"}

# each user's JupyterLab, as their own system user, from the hub's environment
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(HUB_ENV / "bin" / "jupyterhub-singleuser")]
# a terminal's shell as the server's own environment has it: without this, a server that was not
# started from a terminal runs a login shell, and Debian's /etc/profile then resets PATH, so that
# `python` in a terminal on the hub would not be the hub environment's (the graders' commands need it)
TERMINAL = '--ServerApp.terminado_settings={"shell_command": ["/bin/bash"]}'
c.Spawner.args = [TERMINAL]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
ENVIRONMENT = {
    "PATH": f"{HUB_ENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",   # terminals and kernels find the course's python
    "GRADER_EXCHANGE_ROOT": EXCHANGE,      # grader/course.py and nbgrader_config_students.py read it
    "OMP_NUM_THREADS": "1",                # many kernels share the machine's cores
    "LANG": "C.UTF-8",
}
c.Spawner.environment = ENVIRONMENT


def course_of_the_user(spawner):
    """Each user's server gets their course's id (users.txt): their Assignments tab lists that
    course's assignments only (grader/course.py and nbgrader_config_students.py read it)."""
    spawner.environment = {**spawner.environment, "GRADER_COURSE_ID": ACCOUNTS[spawner.user.name][1]}


c.Spawner.pre_spawn_hook = course_of_the_user

# Several courses, several graders (nbgrader's shared grader pattern): each course's grader account
# (users.txt, role grader) owns the course and runs its JupyterLab with the Formgrader as the service
# /services/<course id>/. Its instructors and TAs (group formgrade-<course id>) may use that service,
# so they share one course folder and one gradebook; the course's students (group
# nbgrader-<course id>) may only see that the service exists (the Course List). The service's name is
# the course id, which is how nbgrader's Course List finds a course's Formgrader.
c.JupyterHub.load_groups = {}
c.JupyterHub.load_roles = [
    # each user's server acts with its user's own rights (nbgrader's Course List asks the hub's API
    # which courses its user grades)
    {"name": "server", "scopes": ["inherit"]},
]
# A service's JupyterLab is jupyterhub-singleuser, run so that SIGINT stops it whatever the hub
# inherited. JupyterHub starts the services before it sets its own signal handlers, so a service
# inherits the hub's launcher's SIGINT: a hub started in the background by a script (`make hub &`,
# a CI job) ignores SIGINT, and so would each service, and JupyterHub would wait its interrupt_timeout
# (30 s) per service on every stop before sending SIGTERM. The users' servers, started later, are not
# affected; this restores for the services what Python gives a process whose SIGINT was left alone.
SERVICE_SERVER = [str(HUB_ENV / "bin" / "python"), "-c",
                  "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
                  "from jupyterhub.singleuser import main; sys.exit(main())"]
c.JupyterHub.services = []
for number, course in enumerate(COURSES):
    graders = members(course, "instructor", "ta")
    c.JupyterHub.load_groups[f"formgrade-{course}"] = {"users": graders}
    c.JupyterHub.load_groups[f"nbgrader-{course}"] = {"users": members(course, "student")}
    c.JupyterHub.load_roles += [
        {"name": f"formgrade-{course}", "groups": [f"formgrade-{course}"],
         "scopes": [f"access:services!service={course}", "list:services", f"read:services!service={course}"]},
        {"name": f"nbgrader-{course}", "groups": [f"nbgrader-{course}"],
         "scopes": ["list:services", f"read:services!service={course}"]},
    ]
    [account] = members(course, "grader")
    c.JupyterHub.services.append({
        "name": course,
        "url": f"http://127.0.0.1:{SERVICE_PORT + number}",
        "command": [*SERVICE_SERVER, TERMINAL],
        "user": account,                               # started as the grader account (setuid, as a spawner does)
        "cwd": str(Path("~" + account).expanduser()),
        "environment": {**ENVIRONMENT, "GRADER_COURSE_ID": course, "JUPYTERHUB_DEFAULT_URL": "/lab"},
        "oauth_no_confirm": True,                      # its graders need no "authorize" page
    })
