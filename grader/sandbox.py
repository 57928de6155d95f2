"""The sandbox a student's kernel runs in: bubblewrap (Debian package `bubblewrap`) under
prlimit, started as the kernel's own command line.

What the kernel can see: the system's read-only directories, the Python installation and the
virtual environment (read-only), its own working copy (read-write, where its notebook is), a
private /tmp, and the directory holding its connection file. Not the repository (solutions/,
mutants/, the gradebook), not other students' copies, not the grader's home. It runs as uid
65534 in user, PID, IPC, UTS and cgroup namespaces of its own, with resource limits on address
space, CPU time, file size and open files; a watchdog in the execute worker caps the number of
processes (RLIMIT_NPROC cannot, for a sandbox started by root), and ending the kernel's
process group ends everything inside it (--die-with-parent, a PID namespace).

Warm kernels (WarmKernels, below, and grader/runtime/warm_kernels.py) build the same sandbox
themselves, from a fork server that has imported torch, matplotlib and ipykernel once per batch;
a batch of two submissions or more uses them, and falls back to bubblewrap where they cannot start.
"""
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Limits:
    memory_bytes: int = 8 * 2**30        # address space; torch needs a few GiB of it to import
    cpu_seconds: int = 900
    file_bytes: int = 256 * 2**20
    open_files: int = 512
    max_processes: int = 64              # enforced by the watchdog in execute_worker
    output_bytes_per_cell: int = 1 * 2**20
    output_bytes_total: int = 8 * 2**20


def _has_gpu_device():
    """Whether this machine shows a GPU that Triton compiles for (NVIDIA's, AMD's or WSL's device nodes)."""
    return any(Path(node).exists() for node in ("/dev/nvidiactl", "/dev/kfd", "/dev/dxg"))


# Triton kernels (lecture 11, a7) run in Triton's interpreter where there is no GPU, and Triton must know it
# before it is first imported in a process: triton.language makes its own kernels (tl.max, tl.sum) at that
# import, and much imports it early (torch.utils.flop_counter and torch._dynamo, so the kernel's prelude and
# the warm-kernel server; a catalogue of kernels, grader/mutants.py). A sandbox never has a GPU.
TRITON_WITHOUT_GPU = {"TRITON_INTERPRET": "1"}

# What every graded run of a notebook sees, sandboxed, unsandboxed or in-process: no plot windows,
# no progress bars, one thread per kernel (graders run side by side, and two OpenMP threads on two
# busy cores stall on every small op), NBGRADER_EXECUTION as nbgrader sets it, so notebooks
# skip their timing and training demos, and Triton's interpreter on a machine without a GPU.
# held while this process's environment is changed or copied: a thread starting a kernel never copies it half-way
# through an in-process run's change (grader/inprocess.py: environment), which another thread may make meanwhile
ENVIRON_LOCK = threading.Lock()
GRADED_RUN_ENV = {"MPLBACKEND": "Agg", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
                  "NBGRADER_EXECUTION": "autograde", **({} if _has_gpu_device() else TRITON_WITHOUT_GPU)}


class SandboxUnavailable(RuntimeError):
    pass


def _python_dirs():
    """Directories the interpreter needs: the venv and the base installation it points to."""
    dirs = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    executable = Path(sys.executable)
    dirs.add(executable.resolve().parent.parent)
    return sorted(dirs)


def kernel_python():
    """This interpreter as the sandbox sees it: the sandbox mounts the venv at its real path, so a
    venv reached through a link (a checkout whose .venv links to another's) is named by that path."""
    executable = Path(sys.executable)
    try:
        return str(Path(sys.prefix).resolve() / executable.relative_to(sys.prefix))
    except ValueError:   # not inside the venv's folder: as it is
        return sys.executable


SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ssl", "/etc/alternatives",
               # /etc/fonts: without it matplotlib's font search (fc-list) prints "Fontconfig error:
               # Cannot load default config file" under the setup cell of every student's feedback
               "/etc/fonts")


@dataclass
class Layout:
    """What a sandboxed kernel sees, whichever way it is started (bubblewrap, or warm kernels)."""
    read_only: list
    writable: list      # the working copy (also the working directory) and the ipc sockets' folder
    env: dict

    @classmethod
    def for_kernel(cls, workdir, runtime_dir):
        read_only = [d for d in SYSTEM_DIRS if Path(d).exists()] + [str(d) for d in _python_dirs()]
        env = {"HOME": str(workdir), "PATH": f"{Path(kernel_python()).parent}:/usr/bin:/bin",
               "MPLCONFIGDIR": "/tmp/matplotlib", "IPYTHONDIR": "/tmp/ipython", "LANG": "C.UTF-8",
               **GRADED_RUN_ENV, **TRITON_WITHOUT_GPU}
        return cls(read_only, [str(runtime_dir), str(workdir)], env)


def bwrap_argv(workdir, runtime_dir):
    # no --new-session: the kernel must stay in its process group, where interrupts are sent
    # --unshare-all includes the network: the kernel has only a loopback of its own (no route out,
    # nothing of the host's 127.0.0.1); it talks to the grader over ipc sockets in runtime_dir
    layout = Layout.for_kernel(workdir, runtime_dir)
    argv = ["bwrap", "--die-with-parent", "--unshare-all",
            "--uid", "65534", "--gid", "65534", "--clearenv",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    for path in layout.read_only:
        argv += ["--ro-bind", path, path]
    for path in layout.writable:   # the kernel creates its sockets in runtime_dir
        argv += ["--bind", path, path]
    argv += ["--chdir", str(workdir)]
    for name, value in layout.env.items():
        argv += ["--setenv", name, value]
    return argv


def prlimit_argv(limits):
    return ["prlimit", f"--as={limits.memory_bytes}", f"--cpu={limits.cpu_seconds}",
            f"--fsize={limits.file_bytes}", f"--nofile={limits.open_files}", "--core=0", "--"]


def kernel_command(workdir, runtime_dir, limits):
    return (prlimit_argv(limits) + bwrap_argv(workdir, runtime_dir)
            + [kernel_python(), "-m", "ipykernel_launcher", "-f", "{connection_file}"])


def write_kernelspec(kernels_dir, workdir, runtime_dir, limits, name="course-sandbox", kernel_server=None):
    """A kernelspec whose command line is the sandboxed kernel (a warm one from `kernel_server`, a
    WarmKernels, when given); returns its name."""
    spec_dir = Path(kernels_dir) / "kernels" / name
    spec_dir.mkdir(parents=True, exist_ok=True)
    argv = (kernel_server.kernel_command(kernels_dir, workdir, runtime_dir, limits) if kernel_server is not None
            else kernel_command(workdir, runtime_dir, limits))
    spec = {"argv": argv, "display_name": "sandboxed Python 3",
            # interrupts as messages: the kernel signals itself inside the sandbox (a signal sent
            # from outside would hit bubblewrap, which would end the sandbox instead)
            "language": "python", "interrupt_mode": "message"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return name


# ---- warm kernels: the same sandbox, started by a fork server that has imported torch once ----

WARM_SERVER = Path(__file__).resolve().parent / "runtime" / "warm_kernels.py"
KERNEL_STUB = Path(__file__).resolve().parent / "runtime" / "kernel_stub.py"
KERNEL_PIDS_FILE = "kernel-pids.json"    # in the runtime folder: the stub writes the sandbox's pids


def read_json(path):
    """A small JSON file the other side of a kernel run writes (status, pids); {} if absent or half-written."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


class ForkServer:
    """A helper process started once per batch: it prints "ready", then forks one fresh child per
    connection to folder/server.sock (runtime/warm_kernels.py: serve_forking). WarmKernels, below, and
    stages.execute.WorkerServer are the two. close() ends it and removes its folder."""

    def __init__(self, process, folder):
        self.process, self.folder, self.socket = process, Path(folder), Path(folder) / "server.sock"

    @classmethod
    def launch(cls, command, folder, timeout, **popen_options):
        """Start `command`; (the server, None) once it said "ready", else (None, its log's last words)."""
        folder = Path(folder)
        with open(folder / "server.log", "w") as log:   # a file, not a pipe nobody reads: never blocks it
            process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, stdin=subprocess.DEVNULL,
                                       text=True, start_new_session=True, **popen_options)
        server = cls(process, folder)
        if _read_line(process.stdout, timeout) == "ready":
            return server, None
        said = (folder / "server.log").read_text(errors="replace").strip()[-300:]
        server.close()
        return None, said or "no answer"

    def close(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        self.process.stdout.close()
        shutil.rmtree(self.folder, ignore_errors=True)


class WarmKernels(ForkServer):
    """The fork server of grader/runtime/warm_kernels.py, for one batch: `start()` it, pass it to
    execute(), `close()` it. Each kernel is a fresh fork in a sandbox of its own, never reused."""

    @classmethod
    def start(cls, timeout=120, imports=()):
        """Start the server, holding `imports` too (module names: an assignment's warm imports), and prove it
        can build a sandbox here; raise SandboxUnavailable if not."""
        folder = Path(tempfile.mkdtemp(prefix="grader-warm-", dir="/tmp"))
        (folder / "root").mkdir()
        # a clean environment, not the grader's: a fork keeps its parent's initial environment block,
        # which /proc/self/environ shows whatever the kernel's os.environ says (a database URL with its
        # password, a token: nothing of the grader's may be there)
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": str(folder),
               "MPLCONFIGDIR": str(folder / "matplotlib"), **GRADED_RUN_ENV, **TRITON_WITHOUT_GPU}
        server, said = cls.launch([kernel_python(), "-I", str(WARM_SERVER), str(folder / "server.sock"),
                                   str(folder / "root"), ",".join(imports)], folder, timeout, env=env)
        if server is None:
            raise SandboxUnavailable(f"the warm kernel server did not start ({said})")
        problem = server.probe()
        if problem:
            server.close()
            raise SandboxUnavailable(f"the warm kernel server cannot build a sandbox here: {problem}")
        return server

    def request(self, workdir, runtime_dir, limits):
        layout = Layout.for_kernel(workdir, runtime_dir)
        return {"read_only": layout.read_only, "writable": layout.writable, "env": layout.env, "cwd": str(workdir),
                "limits": {"RLIMIT_AS": limits.memory_bytes, "RLIMIT_CPU": limits.cpu_seconds,
                           "RLIMIT_FSIZE": limits.file_bytes, "RLIMIT_NOFILE": limits.open_files, "RLIMIT_CORE": 0}}

    def kernel_command(self, control, workdir, runtime_dir, limits):
        request_file = Path(control) / "warm-request.json"
        request_file.write_text(json.dumps(self.request(workdir, runtime_dir, limits)))
        return [sys.executable, "-I", "-S", str(KERNEL_STUB), str(self.socket), str(request_file),
                "{connection_file}", str(Path(runtime_dir) / KERNEL_PIDS_FILE)]

    def probe(self):
        """Start one sandbox that checks itself and exits; None if it worked, else what went wrong."""
        with tempfile.TemporaryDirectory(prefix="grader-probe-", dir="/tmp") as scratch:
            request = dict(self.request(scratch, scratch, Limits()), probe=True, connection_file="")
            (Path(scratch) / "request.json").write_text(json.dumps(request))
            result = subprocess.run([sys.executable, "-I", "-S", str(KERNEL_STUB), str(self.socket),
                                     str(Path(scratch) / "request.json"), "", str(Path(scratch) / "pids.json")],
                                    capture_output=True, text=True, timeout=60)
        if result.returncode != 0:
            return (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1]
        return None


def _read_line(stream, timeout):
    readable, _, _ = select.select([stream], [], [], timeout)
    return stream.readline().strip() if readable else ""


def check_available(root="/"):
    """Raise SandboxUnavailable if bubblewrap cannot start a sandbox here. The message says why
    and how to fix it on the system it detected (its first line is the short reason)."""
    system = detect_system(root)
    if system.kind in ("macos", "windows"):
        raise SandboxUnavailable(
            f"the grading sandbox (bubblewrap) runs only on Linux, and this is {system.name}.\n"
            "  fix: grade on a Linux machine, a Linux VM, or WSL2 on Windows; in a Docker container, "
            "start it with\n  --security-opt seccomp=unconfined --security-opt apparmor=unconfined "
            "(bubblewrap creates namespaces, which Docker's default profiles block)\n"
            "  then run this command again")
    for tool, package in (("bwrap", "bubblewrap"), ("prlimit", "util-linux")):
        if shutil.which(tool) is None:
            raise SandboxUnavailable(
                f"`{tool}` is not installed (it comes with the {package} package; this is {system.name}).\n"
                f"  fix: {install_command(system)}\n" + _userns_advice(system, root) +
                "  then run this command again")
    probe = bwrap_argv(Path("/tmp"), Path("/tmp")) + ["/bin/true"]
    try:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SandboxUnavailable(f"bubblewrap could not start: {error}.\n  then run this command again") from error
    if result.returncode != 0:
        said = result.stderr.strip().splitlines()[-1] if result.stderr.strip() else f"exit {result.returncode}"
        raise SandboxUnavailable(f"bubblewrap is installed but could not create its namespaces "
                                 f"(bwrap said: {said}; this is {system.name}).\n"
                                 + (_userns_advice(system, root) or _namespace_advice(system, root))
                                 + "  then run this command again")


def unavailable_reason():
    """None where the sandbox works here, else its short reason (the first line of check_available's
    message)."""
    try:
        check_available()
        return None
    except SandboxUnavailable as error:
        return str(error).splitlines()[0].rstrip(".")


# ---- what system is this, and what fixes the sandbox on it ----

@dataclass
class System:
    kind: str          # "debian" (Debian, Ubuntu, Mint...), "fedora" (Fedora, RHEL, CentOS, Rocky...),
                       # "arch", "suse", "alpine", "linux" (another), "macos", "windows"
    name: str          # for people: "Ubuntu 24.04.1 LTS"


def detect_system(root="/"):
    """Read the platform and /etc/os-release (under `root`, so tests can fake a machine)."""
    if Path(root) == Path("/") and sys.platform == "darwin":
        return System("macos", "macOS")
    if Path(root) == Path("/") and sys.platform in ("win32", "cygwin"):
        return System("windows", "Windows")
    fields = {}
    for candidate in ("etc/os-release", "usr/lib/os-release"):
        path = Path(root) / candidate
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                key, _, value = line.partition("=")
                fields[key.strip()] = value.strip().strip('"')
            break
    ids = {fields.get("ID", "").lower(), *fields.get("ID_LIKE", "").lower().split()}
    name = fields.get("PRETTY_NAME") or fields.get("NAME") or "Linux"
    if "darwin" in ids or "macos" in ids:
        return System("macos", name)
    for kind, members in (("debian", {"debian", "ubuntu"}), ("fedora", {"fedora", "rhel", "centos"}),
                          ("arch", {"arch"}), ("suse", {"suse", "opensuse"}), ("alpine", {"alpine"})):
        if ids & members:
            return System(kind, name)
    return System("linux", name)


def install_command(system):
    return {"debian": "sudo apt-get install bubblewrap util-linux",
            "fedora": "sudo dnf install bubblewrap util-linux",
            "arch": "sudo pacman -S bubblewrap util-linux",
            "suse": "sudo zypper install bubblewrap util-linux",
            "alpine": "sudo apk add bubblewrap util-linux"}.get(
        system.kind, "install your distribution's bubblewrap package (it provides `bwrap`) and util-linux "
                     "(`prlimit`)")


def _read_setting(root, relative):
    try:
        return (Path(root) / relative).read_text().strip()
    except OSError:
        return None


def _userns_advice(system, root="/"):
    """The fix for Ubuntu 23.10+'s AppArmor restriction on unprivileged user namespaces, when it is on
    and we are not root (root keeps the right to create namespaces); '' otherwise."""
    restricted = _read_setting(root, "proc/sys/kernel/apparmor_restrict_unprivileged_userns") == "1"
    if not restricted or (Path(root) == Path("/") and os.geteuid() == 0):
        return ""
    return ("  and: this system restricts user namespaces to programs AppArmor allows "
            "(kernel.apparmor_restrict_unprivileged_userns = 1, as on Ubuntu 24.04). Allow bubblewrap:\n"
            "    sudo apt-get install apparmor-profiles && sudo install -m 0644 "
            "/usr/share/apparmor/extra-profiles/bwrap-userns-restrict /etc/apparmor.d/ && "
            "sudo apparmor_parser -r /etc/apparmor.d/bwrap-userns-restrict\n"
            "  or lift the restriction for the whole machine (simpler, broader):\n"
            "    sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0   (to keep it after a reboot: "
            "echo kernel.apparmor_restrict_unprivileged_userns=0 | sudo tee /etc/sysctl.d/60-userns.conf)\n")


def _namespace_advice(system, root="/"):
    """Why else bubblewrap cannot create namespaces here, and the fix."""
    if _read_setting(root, "proc/sys/kernel/unprivileged_userns_clone") == "0":
        return ("  fix: unprivileged user namespaces are switched off (kernel.unprivileged_userns_clone = 0): "
                "sudo sysctl -w kernel.unprivileged_userns_clone=1\n")
    if _read_setting(root, "proc/sys/user/max_user_namespaces") == "0":
        return ("  fix: user namespaces are switched off (user.max_user_namespaces = 0): "
                "sudo sysctl -w user.max_user_namespaces=10000\n")
    if any((Path(root) / marker).exists() for marker in (".dockerenv", "run/.containerenv")):
        return ("  fix: this is a container, and its runtime blocks namespaces: start it with "
                "--security-opt seccomp=unconfined --security-opt apparmor=unconfined (or grade on the host)\n")
    return ("  fix: bubblewrap needs user namespaces; check `unshare --user --map-root-user true` works for "
            "this user, then the kernel's user-namespace settings\n")
