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
USERS = {name: role for name, role in (line.split() for line in (HERE / "users.txt").read_text().splitlines()
                                       if line.strip() and not line.lstrip().startswith("#"))}


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
c.Authenticator.allowed_users = set(USERS)

# each user's JupyterLab, as their own system user, from the hub's environment
c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(HUB_ENV / "bin" / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 120
c.Spawner.http_timeout = 120
c.Spawner.environment = {
    "PATH": f"{HUB_ENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",   # terminals and kernels find the course's python
    "GRADER_EXCHANGE_ROOT": EXCHANGE,      # grader/course.py and nbgrader_config_students.py read it
    "OMP_NUM_THREADS": "1",                # many kernels share the machine's cores
    "LANG": "C.UTF-8",
}
