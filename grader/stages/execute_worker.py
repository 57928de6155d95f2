"""Runs one instrumented notebook with nbclient; started by execute.py in a process session of
its own so that everything it starts can be ended together. Writes executed.ipynb and
status.json (kernel pid, the cell being run, a fatal problem) into the working copy."""
import json
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from ..course import KERNEL_NAME


def main(workdir, cell_timeout):
    workdir = Path(workdir)
    status = {"kernel_pids": []}

    def save_status():
        (workdir / "status.json").write_text(json.dumps(status))

    nb = nbformat.read(str(workdir / "run.ipynb"), as_version=4)
    client = NotebookClient(nb, timeout=cell_timeout, kernel_name=KERNEL_NAME, allow_errors=True,
                            interrupt_on_timeout=True, record_timing=False,
                            resources={"metadata": {"path": str(workdir)}})

    def on_cell_start(cell, cell_index, **_):
        status["cell"] = cell_index   # index in the instrumented notebook (prelude is 0)
        if client.km is not None and not status["kernel_pids"]:
            pid = getattr(getattr(client.km, "provisioner", None), "pid", None)
            if pid:
                status["kernel_pids"].append(pid)
        save_status()

    client.on_cell_start = on_cell_start
    try:
        client.execute()
    except DeadKernelError as error:
        status["note"] = f"the kernel died during cell {status.get('cell', '?')} ({error}); later tests did not run"
    except Exception as error:  # noqa: BLE001 - reported to the grader as the reason
        status["fatal"] = f"{type(error).__name__}: {str(error)[:300]}"
    save_status()
    nbformat.write(nb, str(workdir / "executed.ipynb"))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
