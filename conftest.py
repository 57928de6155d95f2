"""Loaded by every pytest run in this repository, the whole suite or one notebook under nbval.

No test downloads anything. Lecture 9 and tests/test_real_models.py build their transformers models from
configurations, and the kernels that nbval starts inherit HF_HUB_OFFLINE, so the lecture's cells for the
real GPT-2 skip instead of downloading it.

The checkout's notebooks under nbval, however pytest is started (`make test`, or one lecture alone:
`pytest lectures/04_multi_head_attention.ipynb`): each notebook cell is marked `notebook`; a notebook
whose only optional package is tqdm also `hosted`, and runs in the hosted runtime, alone in an empty
folder, its first cell checked to print its device (tests/support/hosted.py). The tests' own fixtures
and hooks are in tests/conftest.py."""
import os
import sys
from pathlib import Path

import pytest

os.environ["HF_HUB_OFFLINE"] = "1"
sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))

from support import hosted


@pytest.hookimpl(tryfirst=True)   # before tests/conftest.py's, which marks every notebook cell `slow`
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix != ".ipynb":
            continue
        item.add_marker(pytest.mark.notebook)
        if hosted.nbval_runs_it_hosted(item.path):
            item.add_marker(pytest.mark.hosted)
            hosted.host_nbval_notebook(item.parent)
            if item.cell_num == 0:
                hosted.check_device_after(item)
