"""The code passes ruff with the project's settings (pyproject.toml: pyflakes, pycodestyle, blind
excepts, sorted imports, and no `noqa` that suppresses nothing)."""
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    result = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", "."], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"ruff check (`make lint`):\n{result.stdout[-4000:]}{result.stderr[-2000:]}"
