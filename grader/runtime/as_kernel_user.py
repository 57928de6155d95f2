"""Start a kernel as an unprivileged user, for a grader running as root where the sandbox cannot be
built (inside a Docker container such as Gradescope's, bubblewrap usually cannot create namespaces).

    python -I -S as_kernel_user.py UID GID TOP LIMITS_JSON -- COMMAND...

Run as root, by jupyter_client, in the kernel's working copy (its current directory). It gives the
kernel user its working copy and the folder of its connection file and ipc sockets, lets it pass
through (not list) the folders from TOP down to its working copy, sets the resource limits, drops to
UID/GID with no supplementary groups and no_new_privs, and replaces itself by COMMAND with a clean
environment. Whatever root created with umask 077 (the hidden tests, the reference solution, the
gradebooks, the grader's own files) stays unreadable to the kernel; what this does NOT give is a
sandbox: the kernel still sees the network and the rest of the file system as that user does.

Standard library only (it runs with -I -S, before any of the grader's imports)."""
import ctypes
import json
import os
import resource
import sys
from pathlib import Path

PR_SET_NO_NEW_PRIVS = 38
RLIMITS = {"memory_bytes": resource.RLIMIT_AS, "cpu_seconds": resource.RLIMIT_CPU,
           "file_bytes": resource.RLIMIT_FSIZE, "open_files": resource.RLIMIT_NOFILE}
MAX_USER_PROCESSES = 512   # threads count too; the execute worker's watchdog caps processes at 64


def _give(path, uid, gid):
    """`path` and everything under it owned by the kernel user."""
    os.chown(path, uid, gid, follow_symlinks=False)
    for folder, dirs, files in os.walk(path):
        for name in dirs + files:
            os.chown(os.path.join(folder, name), uid, gid, follow_symlinks=False)


def _passable(top, inner):
    """Every folder from `top` down to `inner`'s parent: others may pass through (x), not list."""
    top, folder = Path(top).resolve(), Path(inner).resolve().parent
    if folder != top and top not in folder.parents:
        raise SystemExit(f"as_kernel_user: the kernel's folder {inner} is not inside {top}")
    while True:
        os.chmod(folder, os.stat(folder).st_mode | 0o001)
        if folder == top:
            return
        folder = folder.parent


def prepare_and_drop(uid, gid, top, limits, connection_file=None):
    workdir = os.getcwd()
    _give(workdir, uid, gid)
    _passable(top, workdir)
    if connection_file:   # its folder (under /tmp) also holds the ipc sockets the kernel creates
        _give(os.path.dirname(os.path.abspath(connection_file)), uid, gid)
    for name, value in limits.items():
        if name in RLIMITS:
            resource.setrlimit(RLIMITS[name], (value, value))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (MAX_USER_PROCESSES, MAX_USER_PROCESSES))
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise SystemExit("as_kernel_user: could not drop to the kernel user")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
    return workdir


def kernel_environment(workdir, executable):
    """What the kernel sees of the environment: nothing of the grader's (no token, no database URL)."""
    return {"HOME": workdir, "PATH": f"{os.path.dirname(executable)}:/usr/bin:/bin", "LANG": "C.UTF-8",
            "MPLCONFIGDIR": os.path.join(workdir, ".matplotlib"), "IPYTHONDIR": os.path.join(workdir, ".ipython"),
            "MPLBACKEND": "Agg", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
            "NBGRADER_EXECUTION": "autograde"}


def main(argv):
    if "--" not in argv or argv.index("--") != 4:
        raise SystemExit("usage: as_kernel_user.py UID GID TOP LIMITS_JSON -- COMMAND...")
    uid, gid, top, limits = int(argv[0]), int(argv[1]), argv[2], json.loads(argv[3])
    command = argv[5:]
    connection_file = command[command.index("-f") + 1] if "-f" in command[:-1] else None
    workdir = prepare_and_drop(uid, gid, top, limits, connection_file)
    os.execve(command[0], command, kernel_environment(workdir, command[0]))


if __name__ == "__main__":
    main(sys.argv[1:])
