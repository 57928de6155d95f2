"""How many CPUs this process may really use: the fewest of the cores it may run on
(os.sched_getaffinity: taskset, cpuset) and its cgroup's CPU quota (a container's `--cpus`, a
Kubernetes pod's CPU limit, systemd's CPUQuota=), rounded up to whole cores.

os.cpu_count() answers the machine's core count, which in a container limited to 2 CPUs on a
64-core host is 64: the grader would then start 64 kernels that share 2 CPUs' worth of time and
a few GiB of memory. The quota is read from the cgroup files of this process:

  cgroup v2  <mount>/<group>/cpu.max               "200000 100000" (2 CPUs) or "max 100000" (none)
  cgroup v1  <cpu mount>/<group>/cpu.cfs_quota_us  200000 (or -1: none)
             <cpu mount>/<group>/cpu.cfs_period_us 100000

for the group named in /proc/self/cgroup and each of its parents (the tightest one holds), where
the group folder exists under the mount (inside a container's cgroup namespace the group is "/",
the mount's top). Every path is read under `root`, so tests can fake a machine's files.
"""
import math
import os
from pathlib import Path

V1_CONTROLLER_DIRS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")


def _read(path):
    try:
        return Path(path).read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _groups(root):
    """{"v2": "/path"} and/or {"v1": "/path"} from /proc/self/cgroup under root ({} when absent)."""
    text = _read(Path(root) / "proc/self/cgroup") or ""
    groups = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "":
            groups["v2"] = path
        elif "cpu" in controllers.split(","):
            groups["v1"] = path
    return groups


def _candidates(mount, group):
    """The group's folder and each parent's, up to the mount's top, that exist (innermost first);
    the top alone when the group's folder is not visible (another cgroup namespace)."""
    mount = Path(mount)
    parts = [p for p in (group or "/").split("/") if p]
    folders = [mount.joinpath(*parts[:n]) for n in range(len(parts), 0, -1)] + [mount]
    return [folder for folder in folders if folder.is_dir()] or [mount]


def _v2_quota(root, group):
    """The tightest cpu.max quota in CPUs along the group's path, None for none ("max" or no file)."""
    quotas = []
    for folder in _candidates(Path(root) / "sys/fs/cgroup", group):
        fields = (_read(folder / "cpu.max") or "").split()
        if len(fields) == 2 and fields[0] != "max":
            try:
                quota, period = int(fields[0]), int(fields[1])
            except ValueError:
                continue
            if quota > 0 and period > 0:
                quotas.append(quota / period)
    return min(quotas) if quotas else None


def _v1_quota(root, group):
    """The tightest cpu.cfs_quota_us / cpu.cfs_period_us along the group's path, None for none (-1)."""
    quotas = []
    for name in V1_CONTROLLER_DIRS:
        mount = Path(root) / "sys/fs/cgroup" / name
        if not mount.is_dir():
            continue
        for folder in _candidates(mount, group):
            quota, period = _read(folder / "cpu.cfs_quota_us"), _read(folder / "cpu.cfs_period_us")
            try:
                quota, period = int(quota), int(period)
            except (TypeError, ValueError):
                continue
            if quota > 0 and period > 0:
                quotas.append(quota / period)
        break
    return min(quotas) if quotas else None


def cgroup_cpu_quota(root="/"):
    """The CPU quota of this process's cgroup in CPUs (1.5 for "150000 100000"), or None when there is
    none: no cgroup files, "max" (v2) or -1 (v1)."""
    groups = _groups(root)
    quotas = []
    if "v2" in groups:
        quotas.append(_v2_quota(root, groups["v2"]))
    if "v1" in groups:
        quotas.append(_v1_quota(root, groups["v1"]))
    if not groups:      # no /proc/self/cgroup (a fake tree, a restricted /proc): the mount's top
        quotas += [_v2_quota(root, "/"), _v1_quota(root, "/")]
    quotas = [q for q in quotas if q is not None]
    return min(quotas) if quotas else None


def _affinity():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):       # macOS, Windows
        return os.cpu_count() or 1


def available_cpus(root="/", affinity=None):
    """Whole CPUs this process may use: min(cores it may run on, cgroup quota rounded up), at least 1.
    `affinity` (a count) replaces os.sched_getaffinity for tests."""
    cores = affinity if affinity is not None else _affinity()
    quota = cgroup_cpu_quota(root)
    if quota is not None:
        cores = min(cores, math.ceil(quota - 1e-9))
    return max(1, cores)
