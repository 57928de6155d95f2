"""grader/cpus.py: the CPUs a grading run may use follow the container's cgroup quota, read from a
fake machine's files (a root folder holding proc/self/cgroup and sys/fs/cgroup/...)."""
import pytest

from grader.cpus import available_cpus, cgroup_cpu_quota
from grader.submission import Options


def machine(tmp_path, files):
    """A fake root: {relative path: text}."""
    for relative, text in files.items():
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def v2(tmp_path, cpu_max, group="/"):
    folder = "sys/fs/cgroup" + ("" if group == "/" else group)
    return machine(tmp_path, {"proc/self/cgroup": f"0::{group}\n", f"{folder}/cpu.max": cpu_max})


def v1(tmp_path, quota, period="100000", group="/"):
    folder = "sys/fs/cgroup/cpu,cpuacct" + ("" if group == "/" else group)
    return machine(tmp_path, {"proc/self/cgroup": f"12:pids:{group}\n4:cpu,cpuacct:{group}\n0::/\n",
                              f"{folder}/cpu.cfs_quota_us": f"{quota}\n",
                              f"{folder}/cpu.cfs_period_us": f"{period}\n"})


@pytest.mark.parametrize("cpu_max, quota, cpus", [
    ("200000 100000\n", 2.0, 2),      # docker --cpus=2
    ("150000 100000\n", 1.5, 2),      # a fraction rounds up: 1.5 CPUs keep two kernels busy
    ("50000 100000\n", 0.5, 1),       # never fewer than one
    ("max 100000\n", None, 16),       # no quota: the cores it may run on
])
def test_cgroup_v2(tmp_path, cpu_max, quota, cpus):
    root = v2(tmp_path, cpu_max)
    assert cgroup_cpu_quota(root) == quota
    assert available_cpus(root, affinity=16) == cpus


@pytest.mark.parametrize("quota, period, expected, cpus", [
    ("400000", "100000", 4.0, 4),     # a Kubernetes limit of 4 CPUs on cgroup v1
    ("250000", "100000", 2.5, 3),
    ("-1", "100000", None, 16),       # no quota
])
def test_cgroup_v1(tmp_path, quota, period, expected, cpus):
    root = v1(tmp_path, quota, period)
    assert cgroup_cpu_quota(root) == expected
    assert available_cpus(root, affinity=16) == cpus


def test_the_affinity_is_smaller_than_the_quota(tmp_path):
    assert available_cpus(v2(tmp_path, "800000 100000"), affinity=3) == 3   # taskset -c 0-2 in an 8-CPU pod


def test_no_cgroup_files(tmp_path):
    """No /proc/self/cgroup, no /sys/fs/cgroup (macOS, a restricted container): the affinity alone."""
    assert cgroup_cpu_quota(tmp_path) is None
    assert available_cpus(tmp_path, affinity=6) == 6


def test_a_group_without_a_cpu_file(tmp_path):
    """cgroup v2 without the cpu controller enabled for the group: no cpu.max anywhere, no quota."""
    root = machine(tmp_path, {"proc/self/cgroup": "0::/user.slice/session-3.scope\n",
                              "sys/fs/cgroup/user.slice/session-3.scope/cgroup.procs": "1\n"})
    assert cgroup_cpu_quota(root) is None
    assert available_cpus(root, affinity=4) == 4


def test_the_tightest_parent_holds(tmp_path):
    """A systemd slice of 3 CPUs above a service without a quota of its own: 3."""
    root = machine(tmp_path, {"proc/self/cgroup": "0::/grading.slice/grader.service\n",
                              "sys/fs/cgroup/grading.slice/cpu.max": "300000 100000\n",
                              "sys/fs/cgroup/grading.slice/grader.service/cpu.max": "max 100000\n"})
    assert cgroup_cpu_quota(root) == 3.0
    assert available_cpus(root, affinity=64) == 3


def test_a_container_sees_its_group_as_the_top(tmp_path):
    """In a container's cgroup namespace /proc/self/cgroup says "0::/", and the limit is on the mount's top."""
    root = v2(tmp_path, "100000 100000\n", group="/")
    assert available_cpus(root, affinity=64) == 1


def test_a_group_not_visible_falls_back_to_the_top(tmp_path):
    """/proc/self/cgroup names the host's path, which the container's mount does not show."""
    root = machine(tmp_path, {"proc/self/cgroup": "0::/kubepods/burstable/pod1234/abcd\n",
                              "sys/fs/cgroup/cpu.max": "200000 100000\n"})
    assert available_cpus(root, affinity=32) == 2


def test_garbage_is_no_quota(tmp_path):
    root = v2(tmp_path, "lots\n")
    assert cgroup_cpu_quota(root) is None


def test_autograde_workers_default_to_the_available_cpus(monkeypatch):
    import grader.cpus

    monkeypatch.setattr(grader.cpus, "available_cpus", lambda root="/", affinity=None: 3)
    assert Options().parallel == 3
    assert Options(workers=5).parallel == 5            # --workers wins


def test_this_machine():
    """On the machine running the tests: at least one, at most the cores it may run on."""
    import os

    cpus = available_cpus()
    assert 1 <= cpus <= len(os.sched_getaffinity(0))
