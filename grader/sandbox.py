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
"""
import json
import shutil
import subprocess
import sys
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


# What every graded run of a notebook sees, sandboxed, unsandboxed or in-process: no plot windows,
# no progress bars, one thread per kernel (graders run side by side, and two OpenMP threads on two
# busy cores stall on every small op), and NBGRADER_EXECUTION as nbgrader sets it, so notebooks
# skip their timing and training demos.
GRADED_RUN_ENV = {"MPLBACKEND": "Agg", "TQDM_DISABLE": "1", "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1",
                  "NBGRADER_EXECUTION": "autograde"}


class SandboxUnavailable(RuntimeError):
    pass


def _python_dirs():
    """Directories the interpreter needs: the venv and the base installation it points to."""
    dirs = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    executable = Path(sys.executable)
    dirs.add(executable.resolve().parent.parent)
    return sorted(dirs)


def bwrap_argv(workdir, runtime_dir):
    # no --new-session: the kernel must stay in its process group, where interrupts are sent
    # --unshare-all includes the network: the kernel has only a loopback of its own (no route out,
    # nothing of the host's 127.0.0.1); it talks to the grader over ipc sockets in runtime_dir
    argv = ["bwrap", "--die-with-parent", "--unshare-all",
            "--uid", "65534", "--gid", "65534", "--clearenv",
            "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
    # /etc/fonts: without it matplotlib's font search (fc-list) prints "Fontconfig error: Cannot load
    # default config file" under the setup cell of every student's feedback
    for system_dir in ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc/ssl", "/etc/alternatives",
                       "/etc/fonts"):
        if Path(system_dir).exists():
            argv += ["--ro-bind", system_dir, system_dir]
    for python_dir in _python_dirs():
        argv += ["--ro-bind", str(python_dir), str(python_dir)]
    argv += ["--bind", str(runtime_dir), str(runtime_dir),   # the kernel creates its sockets there
             "--bind", str(workdir), str(workdir), "--chdir", str(workdir)]
    environment = {"HOME": str(workdir), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
                   "MPLCONFIGDIR": "/tmp/matplotlib", "IPYTHONDIR": "/tmp/ipython", "LANG": "C.UTF-8",
                   **GRADED_RUN_ENV}
    for name, value in environment.items():
        argv += ["--setenv", name, value]
    return argv


def prlimit_argv(limits):
    return ["prlimit", f"--as={limits.memory_bytes}", f"--cpu={limits.cpu_seconds}",
            f"--fsize={limits.file_bytes}", f"--nofile={limits.open_files}", "--core=0", "--"]


def kernel_command(workdir, runtime_dir, limits):
    return (prlimit_argv(limits) + bwrap_argv(workdir, runtime_dir)
            + [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"])


def write_kernelspec(kernels_dir, workdir, runtime_dir, limits, name="course-sandbox"):
    """A kernelspec whose command line is the sandboxed kernel; returns its name."""
    spec_dir = Path(kernels_dir) / "kernels" / name
    spec_dir.mkdir(parents=True, exist_ok=True)
    spec = {"argv": kernel_command(workdir, runtime_dir, limits), "display_name": "sandboxed Python 3",
            # interrupts as messages: the kernel signals itself inside the sandbox (a signal sent
            # from outside would hit bubblewrap, which would end the sandbox instead)
            "language": "python", "interrupt_mode": "message"}
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return name


def check_available():
    """Raise SandboxUnavailable with the reason if bubblewrap cannot start a sandbox here."""
    for tool in ("bwrap", "prlimit"):
        if shutil.which(tool) is None:
            raise SandboxUnavailable(f"`{tool}` is not installed (Debian: apt-get install bubblewrap util-linux)")
    probe = bwrap_argv(Path("/tmp"), Path("/tmp")) + ["/bin/true"]
    try:
        result = subprocess.run(probe, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SandboxUnavailable(f"bubblewrap could not start: {error}") from error
    if result.returncode != 0:
        raise SandboxUnavailable("bubblewrap could not create its namespaces "
                                 f"({result.stderr.strip() or result.returncode}); user namespaces disabled?")
