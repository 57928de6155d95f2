"""deploy/kubernetes/: the Zero to JupyterHub values and the exchange's manifests parse, name only
files that exist, and say what deploy/kubernetes/README.md promises (profiles for students and
graders, idle culling, resource limits, the exchange volume, the grading pod's security context);
the image's install steps run here as a dry run (every file they name exists, every pinned
requirement is installed at its pin in an existing environment); the README quotes the grader's own
refusal when the sandbox cannot start."""
import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

yaml = pytest.importorskip("yaml")

REPO = Path(__file__).resolve().parent.parent
HERE = REPO / "deploy" / "kubernetes"
HUB_ENV_PYTHON = Path("/opt/attention-course/venv/bin/python")   # deploy/jupyterhub/install.sh's environment
sys.path.insert(0, str(HERE))
import check_image  # noqa: E402


def values():
    return yaml.safe_load((HERE / "values.yaml").read_text())


def manifests():
    return [doc for doc in yaml.safe_load_all((HERE / "exchange.yaml").read_text()) if doc]


def strings(node):
    """Every string in a parsed YAML tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)
    elif isinstance(node, str):
        yield node


# a path of this repository, as the files write them: deploy/..., grader/..., docs/..., or a top-level file
REPO_PATH = re.compile(r"(?<![\w/.-])((?:deploy|grader|docs|tests|tools)/[\w./-]*[\w]|"
                       r"(?:requirements[\w-]*|constraints)\.txt)")


def named_paths(text):
    return {match.rstrip(".") for match in REPO_PATH.findall(text)}


@pytest.mark.parametrize("name", ["values.yaml", "exchange.yaml", "Dockerfile", "README.md", "image_steps.sh"])
def test_every_file_named_exists(name):
    text = (HERE / name).read_text()
    named = named_paths(text)
    assert named, f"{name} names no file of the repository (the path pattern is broken?)"
    missing = sorted(path for path in named if not (REPO / path).exists())
    assert not missing, f"deploy/kubernetes/{name} names files that do not exist: {missing}"


def test_the_path_finder():
    assert named_paths("see deploy/kubernetes/README.md, then requirements.txt.") == {
        "deploy/kubernetes/README.md", "requirements.txt"}
    assert named_paths("/srv/nbgrader/exchange and https://x.org/deploy/y") == set()


def test_the_values_parse_and_the_hub_config_compiles():
    config = values()
    for name, code in config["hub"]["extraConfig"].items():
        compile(code, f"values.yaml hub.extraConfig.{name}", "exec")


def test_the_extra_config_runs_on_the_values(monkeypatch):
    """hub.extraConfig with a stand-in for z2jh's get_config and JupyterHub's `c`: groups, roles,
    profiles per role and each pod's uid, course group and course id."""
    import types

    from traitlets.config import Config

    config = values()
    z2jh = types.ModuleType("z2jh")

    def get_config(key):
        node = config
        for part in key.split("."):
            node = node[part]
        return node
    z2jh.get_config = get_config
    monkeypatch.setitem(sys.modules, "z2jh", z2jh)
    c = Config()
    c.JupyterHub.load_roles = [{"name": "server", "scopes": ["inherit"]}]
    c.KubeSpawner.profile_list = config["singleuser"]["profileList"]
    exec(config["hub"]["extraConfig"]["10-courses"], {"c": c})

    courses = config["custom"]["courses"]
    assert c.JupyterHub.load_groups["formgrade-attention-course"]["users"] == ["instructor", "ta"]
    roles = {role["name"]: role for role in c.JupyterHub.load_roles}
    assert "access:servers!user=grader-attention-course" in roles["formgrade-attention-course"]["scopes"]

    def spawner(name):
        return types.SimpleNamespace(user=types.SimpleNamespace(name=name), environment={"A": "1"},
                                     uid=None, gid=None, supplemental_gids=[])
    student, grader = spawner("student-c"), spawner("grader-attention-course")
    assert [p["slug"] for p in c.KubeSpawner.profile_list(student)] == ["student"]
    assert [p["slug"] for p in c.KubeSpawner.profile_list(grader)] == ["grader"]
    c.KubeSpawner.pre_spawn_hook(student)
    assert student.uid == config["custom"]["uids"]["student-c"]
    assert student.supplemental_gids == [courses["attention-seminar"]["gid"]]
    assert student.environment == {"A": "1", "GRADER_COURSE_ID": "attention-seminar",
                                   "GRADER_EXCHANGE_ROOT": "/srv/nbgrader/exchange"}
    uids = list(config["custom"]["uids"].values())
    assert len(set(uids)) == len(uids) and min(uids) > 1000, "each person needs a uid of their own"


def test_profiles_limits_culling():
    config = values()
    profiles = {p["slug"]: p for p in config["singleuser"]["profileList"]}
    assert set(profiles) == {"student", "grader"}
    assert config["singleuser"]["cpu"]["limit"] and config["singleuser"]["memory"]["limit"]
    grading = profiles["grader"]["kubespawner_override"]
    assert grading["cpu_limit"] >= 2 and grading["mem_limit"]
    assert config["cull"]["enabled"] is True and config["cull"]["timeout"] > 0


def test_the_exchange_volume_is_everywhere_with_the_permissions():
    config = values()
    mount = config["custom"]["exchange"]["mountPath"]
    singleuser = config["singleuser"]
    assert singleuser["extraEnv"]["GRADER_EXCHANGE_ROOT"] == mount
    mounts = {m["name"]: m["mountPath"] for m in singleuser["storage"]["extraVolumeMounts"]}
    claims = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in singleuser["storage"]["extraVolumes"]}
    claim_name = config["custom"]["exchange"]["claim"]
    assert mounts == {"nbgrader-exchange": mount} and claims == {"nbgrader-exchange": claim_name}
    claim, job = manifests()
    assert claim["kind"] == "PersistentVolumeClaim" and claim["metadata"]["name"] == claim_name
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    script = job["spec"]["template"]["spec"]["containers"][0]["command"][-1]
    assert "chmod 1777 ." in script
    for course, people in config["custom"]["courses"].items():
        owner = config["custom"]["uids"][people["grader"]]
        assert f"chown {owner}:{people['gid']} {course} && chmod 0750 {course}" in script, course


def test_the_grading_pod_may_start_the_sandbox_and_nothing_more():
    grading = {p["slug"]: p for p in values()["singleuser"]["profileList"]}["grader"]["kubespawner_override"]
    context = grading["container_security_context"]
    assert context["seccompProfile"] == {"type": "Unconfined"} and context["appArmorProfile"] == {"type": "Unconfined"}
    assert context["procMount"] == "Unmasked" and grading["extra_pod_config"]["hostUsers"] is False
    assert context["runAsNonRoot"] is True and context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert "privileged" not in context


def test_the_readme_quotes_the_graders_refusal():
    """What grading does without a sandbox, as the README says it, is what the grader prints."""
    readme = (HERE / "README.md").read_text()
    cli = re.sub(r'"\s*\n\s*f?"', "", (REPO / "grader" / "cli.py").read_text())   # adjacent literals joined
    sandbox = (REPO / "grader" / "sandbox.py").read_text()
    refusal = "Refusing to run student code unsandboxed; pass --unsandboxed to do it anyway (trusted notebooks only)."
    assert "autograde: the sandbox is unavailable: {error}.\\n" + refusal in cli
    assert refusal in readme
    assert "bubblewrap is installed but could not create its namespaces" in sandbox
    assert ("autograde: the sandbox is unavailable: bubblewrap is installed but could not create its namespaces"
            in readme)


def test_the_image_steps_dry_run():
    """image_steps.sh --dry-run in the hub environment (JupyterHub and the course's packages)."""
    if not HUB_ENV_PYTHON.exists():
        pytest.skip(f"no hub environment at {HUB_ENV_PYTHON} (deploy/jupyterhub/install.sh makes it)")
    # install.sh stamps the environment with a hash of the files it installed from; an environment made from
    # older requirements is refreshed by the next install.sh (the hub tests run it), not judged here
    pins = b"".join((REPO / f).read_bytes() for f in
                    ("requirements.txt", "deploy/jupyterhub/requirements.txt", "constraints.txt"))
    stamp = HUB_ENV_PYTHON.parent.parent / f".installed-{hashlib.sha256(pins).hexdigest()[:16]}"
    if not stamp.exists():
        pytest.skip(f"the hub environment predates these requirements (no {stamp.name}); install.sh refreshes it")
    result = subprocess.run(["bash", str(HERE / "image_steps.sh"), "--dry-run", str(HUB_ENV_PYTHON)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "files present" in result.stdout and "resolve in" in result.stdout


def test_the_dry_run_names_what_does_not_resolve(tmp_path):
    (tmp_path / "constraints.txt").write_text("torch==2.13.0\n")
    (tmp_path / "requirements.txt").write_text("# a comment\ntorch==2.12.0\nnot-a-package-here==1.0\nloose>=1\n")
    versions = {"torch": "2.13.0+cpu"}
    problems = check_image.check(tmp_path, files=["requirements.txt", "gone.py"], requirements=["requirements.txt"],
                                 constraints="constraints.txt", installed_pins=True, version_of=versions.get)
    text = "\n".join(problems)
    assert "gone.py: named by image_steps.sh, missing" in text
    assert "torch==2.12.0, but constraints.txt holds it at 2.13.0" in text
    assert "not-a-package-here==1.0 is not installed" in text
    assert "'loose>=1' is not pinned as name==version" in text
    assert "torch must stay" not in text, "2.13.0+cpu is 2.13.0"
    assert check_image.check(tmp_path, requirements=[], constraints="constraints.txt", installed_pins=True,
                             version_of=versions.get) == []


def test_the_dockerfile_runs_the_steps():
    dockerfile = (HERE / "Dockerfile").read_text()
    assert "RUN bash /opt/course/deploy/kubernetes/image_steps.sh" in dockerfile
    steps = (HERE / "image_steps.sh").read_text()
    copied = set(re.findall(r"^COPY (.+) \S+$", dockerfile, re.M))
    sources = {path for line in copied for path in line.split()}
    for name in re.findall(r"FILES=\(([^)]*)\)", steps, re.S)[0].split():
        if name.startswith('"$'):
            continue
        assert name in sources, f"image_steps.sh reads {name}, which the Dockerfile does not copy"
    assert "-c \"$course/$CONSTRAINTS\"" in steps, "torch must be held by constraints.txt"
