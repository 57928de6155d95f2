"""Warm kernels: a fork server that starts each student's kernel already holding torch, matplotlib
and ipykernel, inside a sandbox of its own.

A fresh Python spends about 2 CPU-seconds importing torch, matplotlib and ipykernel before the
first cell of a notebook runs; for a class that is most of the grading time. This server pays it
once per batch: it imports them (running nothing of any student's), then for each kernel forks a
copy of itself that builds the same sandbox bubblewrap builds (grader/sandbox.py) and runs the
kernel there. A kernel is never reused: every student gets a fresh fork of an untouched process.

Run as a plain script (`python warm_kernels.py SOCKET ROOT [MODULES]`), never as part of the grader package,
so no grading code is in memory that a kernel could read. The grader starts it
(grader/sandbox.py: WarmKernels); a kernelspec's command is grader/runtime/kernel_stub.py, which
asks for a kernel over SOCKET and stands in for it (exit status, death) towards jupyter_client.

What each kernel gets, as with bubblewrap: new user (uid 65534), mount, PID, network, IPC, UTS and
cgroup namespaces; a root of its own holding the system's read-only directories, the Python
installation (read-only), a fresh /proc, a minimal /dev, a private /tmp, its working copy and the
folder of its ipc sockets (read-write), nothing else; no capabilities and no_new_privs; the
resource limits the request names. Three processes per kernel:
  supervisor (outside the PID namespace): answers the stub, kills everything when the stub goes;
  init (PID 1 inside): builds the root, then reaps orphans until the kernel exits;
  kernel: drops privileges and runs ipykernel.
Each dies with its parent (PR_SET_PDEATHSIG), and the PID namespace dies with its init.

Linux only (x86-64 or arm64); stdlib and ctypes besides the pre-imported packages.
"""
import ctypes
import gc
import json
import os
import platform
import resource
import select
import signal
import socket
import struct
import sys

CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS = 0x00020000, 0x02000000, 0x04000000
CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET = 0x08000000, 0x10000000, 0x20000000, 0x40000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_REC, MS_SLAVE, MS_RELATIME = 1024, 2048, 4096, 16384, 1 << 19, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT = 1, 4, 24, 38, 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SYSCALLS = {"x86_64": {"pivot_root": 155, "capset": 126}, "aarch64": {"pivot_root": 41, "capset": 91}}
# statvfs flags a bind mount keeps when remounted read-only (the kernel refuses to drop locked ones)
KEPT_FLAGS = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
              (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
SANDBOX_UID = 65534

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def _check(result, what):
    if result != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"{what}: {os.strerror(error)}")


def _bytes(value):
    return None if value is None else os.fsencode(value)


def mount(source, target, fstype=None, flags=0, data=None):
    _check(libc.mount(_bytes(source), _bytes(target), _bytes(fstype), flags, _bytes(data)), f"mount {target}")


def prctl(option, value=0):
    _check(libc.prctl(option, value, 0, 0, 0), f"prctl {option}")


def syscall(name, *args):
    _check(libc.syscall(SYSCALLS[platform.machine()][name], *args), name)


# ---- the sandbox: built by the init process, in namespaces the supervisor created ----

def bind(source, target, writable=False):
    """Bind `source` at `target` (inside the new root); read-only unless `writable`, submounts too."""
    if os.path.isdir(source):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        open(target, "a").close()
    mount(source, target, flags=MS_BIND | MS_REC)
    if writable:
        return
    for point in [target] + _submounts(target):
        kept = os.statvfs(point).f_flag
        flags = MS_REMOUNT | MS_BIND | MS_RDONLY
        flags |= sum(ms for st, ms in KEPT_FLAGS if kept & st)
        mount(None, point, flags=flags)


def _submounts(target):
    with open("/proc/self/mountinfo") as handle:
        points = [line.split()[4] for line in handle]
    prefix = target.rstrip("/") + "/"
    return [point.replace("\\040", " ") for point in points if point.startswith(prefix)]


def build_root(root, request):
    """Mount the kernel's whole world under `root`, then make it `/`."""
    mount(None, "/", flags=MS_REC | MS_SLAVE)                       # nothing we mount reaches the host
    mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=16m")
    os.makedirs(root + "/dev", exist_ok=True)
    mount("tmpfs", root + "/dev", "tmpfs", MS_NOSUID, "mode=0755,size=64k")
    for device in DEVICES:
        if os.path.exists("/dev/" + device):
            bind("/dev/" + device, f"{root}/dev/{device}", writable=True)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{root}/dev/{name}")
    os.makedirs(root + "/dev/shm")
    mount("tmpfs", root + "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m")
    os.makedirs(root + "/tmp", exist_ok=True)
    mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=1g")
    os.makedirs(root + "/proc", exist_ok=True)
    mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)   # this PID namespace's
    for path in request["read_only"]:                                # after /tmp: folders under it stay visible
        if os.path.exists(path):
            bind(path, root + path)
    for path in request["writable"]:
        bind(path, root + path, writable=True)
    os.chdir(root)
    syscall("pivot_root", b".", b".")                                # the old root stacks under the new
    _check(libc.umount2(b".", MNT_DETACH), "umount the old root")
    os.chdir("/")
    mount(None, "/", flags=MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    libc.sethostname(b"sandbox", 7)


def drop_privileges(limits):
    """No capabilities (none in the bounding or ambient set either), no way to gain any, limits."""
    for name, value in limits.items():
        resource.setrlimit(getattr(resource, name), (value, value))
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last_cap = int(handle.read())
    for cap in range(last_cap + 1):
        prctl(PR_CAPBSET_DROP, cap)
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    header = struct.pack("Ii", 0x20080522, 0)                        # _LINUX_CAPABILITY_VERSION_3, this process
    data = ctypes.create_string_buffer(24)                           # two empty {effective, permitted, inheritable}
    syscall("capset", ctypes.c_char_p(header), data)
    prctl(PR_SET_NO_NEW_PRIVS, 1)


def run_kernel(request):
    """The kernel process: privileges dropped, the environment the request names, then ipykernel.
    A probe (the grader's check that sandboxes can be built here) stops before the kernel."""
    drop_privileges(request["limits"])
    if request.get("probe"):
        with open("/proc/self/status") as handle:
            capabilities = handle.read().split("CapEff:")[1].split()[0]
        assert os.getpid() == 2 and os.getuid() == SANDBOX_UID and int(capabilities, 16) == 0, \
            f"the sandbox is not what it should be (pid {os.getpid()}, uid {os.getuid()}, capabilities {capabilities})"
        return
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    import random
    random.seed()                                                    # not the state every fork shares
    sys.argv = ["ipykernel_launcher", "-f", request["connection_file"]]
    sys.path[:] = [p for p in sys.path if p and os.path.isdir(p)]    # the server's own folder is not there
    # A graded kernel needs neither a debugger nor a history database: ipykernel imports debugpy
    # (a quarter of a CPU-second and a thread) only to offer one, and IPython keeps the other
    # in SQLite, written by a thread of its own.
    sys.modules["debugpy"] = None
    from ipykernel.kernelapp import IPKernelApp
    IPKernelApp.launch_instance(argv=["-f", request["connection_file"], "--HistoryManager.enabled=False"])


def init(request, root):
    """PID 1 of the kernel's namespace: builds the root, starts the kernel, reaps until it exits."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    build_root(root, request)
    kernel = os.fork()
    if kernel == 0:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _exit_after(run_kernel, request)
    while True:
        pid, status = os.wait()
        if pid == kernel:
            os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def supervise(connection, request, fds, root):
    """Outside the kernel's PID namespace: create the namespaces, start init, report to the stub,
    and end everything when the stub goes away (the grader killed the kernel)."""
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)                          # the server went: so do we
    os.setsid()
    uid, gid = os.getuid(), os.getgid()
    _check(libc.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC
                        | CLONE_NEWUTS | CLONE_NEWCGROUP), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{SANDBOX_UID} {uid} 1"),
                       ("gid_map", f"{SANDBOX_UID} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as handle:
            handle.write(text)
    first = os.fork()
    if first == 0:
        connection.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.closerange(3, 65536)
        _exit_after(init, request, root)
    for fd in fds:
        os.close(fd)
    _send(connection, {"supervisor": os.getpid(), "init": first})
    while True:
        readable, _, _ = select.select([connection], [], [], 0.2)
        if readable and not connection.recv(64):                     # the stub is gone
            os.kill(first, signal.SIGKILL)
            os.waitpid(first, 0)
            os._exit(1)
        pid, status = os.waitpid(first, os.WNOHANG)
        if pid:
            code = os.waitstatus_to_exitcode(status)
            _send(connection, {"exit": code})
            os._exit(code & 0xFF)


def receive_and_supervise(connection, root):
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    message, fds, _, _ = socket.recv_fds(connection, 1 << 16, 3)
    if len(fds) != 3:
        raise OSError("the request came without the stub's stdin, stdout and stderr")
    supervise(connection, json.loads(message), fds, root)


def _exit_after(function, *args, label="warm kernel"):
    """Run function(*args) in a forked child and leave with its status; a child never returns into
    the caller's loop."""
    code = 1
    try:
        function(*args)
        code = 0
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException as error:  # noqa: BLE001 - said on the child's stderr, then exit 1
        print(f"{label}: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
    finally:
        os._exit(code)


def _send(connection, message):
    connection.sendall(json.dumps(message).encode() + b"\n")


# ---- the server ----

def preimport(modules=()):
    """What every kernel would import first, imported once here, then `modules`: what the assignment's
    own tests import (its source notebook's metadata, course.warm_imports: Hugging Face's Llama in
    a6 costs 1.6 CPU-s a kernel), those that are installed. Nothing is run: no tensor is made (a fork
    must not inherit a thread pool), no socket or ZeroMQ context is opened."""
    import importlib

    import matplotlib
    matplotlib.use("Agg")
    # torch imports its compiler on first use of common things: an optimizer's constructor,
    # nn.MultiheadAttention's padding-mask check (symbolic shapes, hence sympy), FlopCounterMode.
    # That is about 1.2 CPU-s in every kernel that trains a model (a2's hidden test does), so once here.
    for module in ("IPython.core.interactiveshell", "ipykernel.ipkernel", "ipykernel.kernelapp", "matplotlib.pyplot",
                   "torch", "torch.nn.functional", "torch.utils.flop_counter", "torch._dynamo"):
        importlib.import_module(module)
    # and what a kernel imports as it starts and runs (about 0.04 CPU-s each): IPython's debugger,
    # completer and store magic, the tornado parts of ipykernel's event loop, and the recorder's
    # torch.save; without debugpy, as run_kernel() starts ipykernel
    sys.modules["debugpy"] = None
    for module in ("IPython.core.completerlib", "IPython.core.debugger", "IPython.core.oinspect",
                   "IPython.extensions.storemagic", "IPython.utils.wildcard", "ipykernel.debugger", "faulthandler",
                   "tornado.gen", "tornado.locks", "tornado.platform.asyncio", "tornado.queues", "zmq.utils.garbage",
                   "torch.utils.serialization", "torch._subclasses.schema_check_mode"):
        importlib.import_module(module)
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:     # not installed here: the notebook's own import says so, in its kernel
            pass


def serve(socket_path, root, modules=()):
    preimport(modules)
    # Every kernel is a copy-on-write fork of this process. A garbage collection in a kernel would
    # visit (hence write to, hence copy) every page of the imported objects; frozen, they are left out.
    gc.collect()
    gc.freeze()
    serve_forking(socket_path, lambda connection: receive_and_supervise(connection, root), "warm kernel")


def reap_finished_children():
    """Wait for every child of this process that has ended, without blocking on those still running."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve_forking(socket_path, handle, label):
    """Say "ready", then for each connection to socket_path fork a child that runs handle(connection)
    and exits (the request is read in the child: the server keeps no student's data); reap them; end
    when the grader that started us has gone (watched, not PR_SET_PDEATHSIG: that fires when the
    *thread* that started us ends). Also the loop of the grader's worker server (execute_worker.py)."""
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        raise SystemExit(f"{label} server: the imports started {threads - 1} thread(s); a fork would lose them")
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(socket_path)
    os.chmod(socket_path, 0o600)
    server.listen(16)
    grader = os.getppid()
    print("ready", flush=True)
    while True:
        readable, _, _ = select.select([server], [], [], 0.5)
        if os.getppid() != grader:
            raise SystemExit(f"{label} server: the grader has gone")
        reap_finished_children()
        if not readable:
            continue
        connection, _ = server.accept()
        if os.fork() == 0:
            server.close()
            _exit_after(handle, connection, label=label)
        connection.close()


if __name__ == "__main__":   # SOCKET ROOT [MODULE,MODULE,...]
    serve(sys.argv[1], sys.argv[2], [name for name in (sys.argv[3] if len(sys.argv) > 3 else "").split(",") if name])
