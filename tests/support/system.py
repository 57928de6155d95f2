"""The system parts some tests need beyond Python 3.11 and make, and what the suite does without
them. A test marked with a part's name (`@pytest.mark.sandbox`, ...) is skipped, with the reason,
where the part is missing, and fails instead when REQUIRE_<PART>=1 (CI sets all of them). The run
ends with one line naming what was skipped and the one command that installs it all."""
import functools
import os
from dataclasses import dataclass

INSTALL = "sudo make system-deps"


@dataclass(frozen=True)
class Part:
    marker: str        # the pytest marker of the tests that need it
    what: str          # for people
    require: str       # the environment variable that turns its skips into failures

    @property
    def required(self):
        return os.environ.get(self.require) == "1"

    def missing(self):
        """None when the part works here, else why not (asked once per run)."""
        return _probe(self.marker)


def _sandbox():
    from grader.sandbox import unavailable_reason
    return unavailable_reason()


def _browser():
    from .browser import what_is_missing
    return "; ".join(what_is_missing()) or None


def _hub():
    from .hub import what_is_missing
    return "; ".join(what_is_missing()) or None


# where .ci/start_postgres.sh (run by `make system-deps` and by CI) starts its throw-away server
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:55432/postgres"


def postgres_url():
    """The PostgreSQL server for the gradebook tests: $GRADER_TEST_POSTGRES_URL, else the one
    .ci/start_postgres.sh starts."""
    return os.environ.get("GRADER_TEST_POSTGRES_URL") or DEFAULT_POSTGRES_URL


def _postgres():
    url = postgres_url()
    try:
        import psycopg2
        psycopg2.connect(url, connect_timeout=5).close()
    except Exception as error:  # noqa: BLE001 - any failure to connect is the reason
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return f"no server at {url} ({first}; start one with `bash .ci/start_postgres.sh`)"
    return None


PARTS = (
    Part("sandbox", "bubblewrap (the grading sandbox)", "REQUIRE_SANDBOX"),
    Part("browser", "Chromium and Playwright", "REQUIRE_BROWSER"),
    Part("hub", "the course JupyterHub", "REQUIRE_HUB"),
    Part("postgres", "a PostgreSQL server", "REQUIRE_POSTGRES"),
)
_PROBES = {"sandbox": _sandbox, "browser": _browser, "hub": _hub, "postgres": _postgres}


@functools.cache
def _probe(marker):
    return _PROBES[marker]()


def skip_reason(part, why):
    """The skip message; the summary line counts skips by its first words."""
    return f"needs {part.what}: {why}"


def summary(skip_messages):
    """The run's last line about missing parts, from the skip messages; None when nothing was
    skipped for want of one."""
    counts = {}
    for message in skip_messages:
        for part in PARTS:
            if f"needs {part.what}:" in message:
                counts[part.what] = counts.get(part.what, 0) + 1
    if not counts:
        return None
    parts = ", ".join(f"{n} for want of {what}" for what, n in counts.items())
    return f"skipped on this machine: {parts}. `{INSTALL}` installs them all (CI requires them)"
