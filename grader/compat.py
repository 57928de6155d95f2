"""The one change the course makes to nbgrader, in one place, applied once per process.

nbgrader stamps every new gradebook with its schema's alembic revision, which it finds by running
the `alembic` program (`nbgrader.api.get_alembic_version`): about 2.8 CPU-s each time (twice per
graded batch), and a failure when the environment's bin folder is not on PATH. alembic's Python API
gives the same answer from the same scripts; it is asked once per process.
"""
import functools
import threading

_LOCK = threading.Lock()


def apply():
    """Patch nbgrader (idempotent; Course.nbgrader_config and every gradebook opening call it)."""
    import nbgrader.api
    with _LOCK:
        if getattr(nbgrader.api.get_alembic_version, "in_process", False):
            return
        alembic_head.in_process = True
        nbgrader.api.get_alembic_version = alembic_head


@functools.cache
def alembic_head():
    """The revision `alembic heads` prints for nbgrader's migration scripts."""
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import _temp_alembic_ini
    with _temp_alembic_ini("sqlite:///gradebook.db") as alembic_ini:
        return ScriptDirectory.from_config(AlembicConfig(alembic_ini)).get_current_head()


def gradebook(db_url):
    """nbgrader's Gradebook on `db_url`, with the patch applied (a new SQLite gradebook is created
    without the alembic program)."""
    apply()
    from nbgrader.api import Gradebook
    return Gradebook(db_url)
