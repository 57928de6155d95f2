"""The course hub for tests/test_hub.py: deploy/jupyterhub/hub.py (what `make hub` runs) started as a
child process, as root or through passwordless sudo (the hub needs root: it starts each user's
server as that user), and commands run as the hub's users through `hub.py as`."""
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from . import browser
from .waiting import TimedOut, wait_until

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy" / "jupyterhub"
HUB_PY = DEPLOY / "hub.py"
# the test's own exchange: every run starts from an empty one; `make hub` keeps /srv/nbgrader/exchange
TEST_EXCHANGE = Path("/srv/nbgrader/exchange-hubtest")

_spec = importlib.util.spec_from_file_location("course_hub_deploy", HUB_PY)
deploy = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(deploy)


def privilege_prefix():
    """[] as root, ["sudo", "-n"] with passwordless sudo, None when neither."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    return None


def what_is_missing():
    """Why the hub test cannot run here ([] = it can)."""
    missing = browser.what_is_missing()
    if privilege_prefix() is None:
        missing.append("neither root nor passwordless sudo (the hub starts each user's server as that user)")
    missing += deploy.missing_parts(need_root=False, check_accounts=False)   # RunningHub makes them
    return missing


def free_ports(count=3):
    """A first port p with p .. p+count-1 all free on 127.0.0.1 (the hub uses p+1 and p+2)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            first = s.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            for port in range(first, first + count):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
    raise RuntimeError("no block of free ports on 127.0.0.1")


class RunningHub:
    """`hub.py --reset` on a free port, its own state folder, the test exchange and fixed passwords."""

    def __init__(self, tmp: Path, log_path: Path):
        self.tmp = Path(tmp)
        self.log_path = Path(log_path)
        self.prefix = privilege_prefix()
        self.port = free_ports(3 + len(deploy.courses()))   # hub, its API, the proxy's API, one per course
        self.url = f"http://127.0.0.1:{self.port}"
        self.passwords = {user: secrets.token_urlsafe(12) for user in deploy.users()}
        self.exchange = TEST_EXCHANGE
        self.proc = None
        self.lines = []
        self.startup_s = None
        self.created_users, self.created_groups = [], []

    def make_accounts(self):
        """users.sh for the accounts and groups of users.txt (install.sh runs it too, so on CI they are
        there); what it had to create here is removed again by stop(), so the machine is left as found."""
        def exists(database, name):
            return subprocess.run(["getent", database, name], capture_output=True).returncode == 0
        wanted_users = list(deploy.users())
        wanted_groups = [deploy.course_group(course) for course in deploy.courses()]
        self.created_users = [user for user in wanted_users if not exists("passwd", user)]
        self.created_groups = [group for group in wanted_groups if not exists("group", group)]
        made = subprocess.run([*self.prefix, "bash", str(DEPLOY / "users.sh"), str(deploy.DEFAULT_ENV)],
                              capture_output=True, text=True, timeout=600)
        if made.returncode != 0:
            self.remove_accounts()
            raise RuntimeError(f"users.sh failed:\n{made.stdout}\n{made.stderr}")

    def remove_accounts(self):
        if self.created_users:   # the test's own exchange: nothing left owned by an account that is gone
            for course in deploy.courses():
                subprocess.run([*self.prefix, "rm", "-rf", "--", str(self.exchange / course)], capture_output=True)
        for user in self.created_users:
            subprocess.run([*self.prefix, "userdel", "--remove", user], capture_output=True)
        for group in self.created_groups:
            subprocess.run([*self.prefix, "groupdel", group], capture_output=True)
        self.created_users, self.created_groups = [], []

    def start(self, timeout=120):
        self.make_accounts()
        password_file = self.tmp / "passwords.json"
        password_file.write_text(json.dumps(self.passwords))
        os.chmod(password_file, 0o600)
        command = [*self.prefix, sys.executable, str(HUB_PY), "--port", str(self.port),
                   "--state", str(self.tmp / "hub-state"), "--exchange", str(self.exchange), "--reset",
                   "--passwords-file", str(password_file), "--log", str(self.log_path)]
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True, preexec_fn=_ignore_sigint)
        up = threading.Event()

        def read():
            for line in self.proc.stdout:
                self.lines.append(line.rstrip())
                if " is up at " in line:
                    up.set()
        threading.Thread(target=read, daemon=True).start()
        try:
            wait_until(up.is_set, timeout, "the hub to start", interval=0.5,
                       stop_early=lambda: self.proc.poll() is not None)
        except TimedOut:
            time.sleep(0.5)   # the reader thread catches the last lines
            self.stop()
            log = self.log_path.read_text()[-4000:] if self.log_path.exists() else "(no log)"
            raise RuntimeError("the hub did not start (hub.py said:\n" + "\n".join(self.lines[-30:]) +
                               f"\n); JupyterHub's log:\n{log}") from None
        match = re.search(r"started in ([0-9.]+) s", "\n".join(self.lines))
        self.startup_s = float(match.group(1)) if match else None
        return self

    def stop(self):
        """SIGTERM to hub.py (through sudo when not root): JupyterHub stops every user's server, the
        services and the proxy; whatever is left after 150 s is killed. Then the accounts the test made
        are removed."""
        try:
            if self.proc is None or self.proc.poll() is not None:
                return
            subprocess.run([*self.prefix, "kill", "-TERM", str(self.proc.pid)], capture_output=True)
            try:
                self.proc.wait(timeout=150)
            except subprocess.TimeoutExpired:
                subprocess.run([*self.prefix, "kill", "-KILL", f"-{self.proc.pid}"], capture_output=True)
                self.proc.wait(timeout=10)
        finally:
            self.remove_accounts()

    def services_sent_sigterm(self):
        """How many of the courses' services the last stop had to send SIGTERM: JupyterHub stops each
        with SIGINT first, and a service that stops on it logs "Interrupted...", one that ignores it
        is sent SIGTERM after interrupt_timeout (30 s) and logs "received signal 15"."""
        stopping = re.search(r"Cleaning up \d+ services(.*?)Cleaning up single-user servers",
                             self.log_path.read_text(), re.DOTALL)
        assert stopping, f"JupyterHub's log ({self.log_path}) does not show it stopping the services"
        return stopping.group(1).count("received signal 15")

    def as_user(self, user, command, cwd=None, env=None, input=None, timeout=600):
        """Run command as a hub user (hub.py as): the user's HOME, the hub environment, the hub's
        exchange; returns the CompletedProcess (text)."""
        env = {"GRADER_EXCHANGE_ROOT": str(self.exchange), **(env or {})}
        argv = [*self.prefix, sys.executable, str(HUB_PY), "as", user,
                *(["--cwd", str(cwd)] if cwd else []), *(f"--env={k}={v}" for k, v in env.items()),
                "--", *map(str, command)]
        return subprocess.run(argv, input=input, capture_output=True, text=True, timeout=timeout)


def _ignore_sigint():
    """hub.py's SIGINT ignored, as a job a script starts in the background (`make hub &`, a CI step)
    has it: what JupyterHub passes on to the courses' services (jupyterhub_config.py)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
