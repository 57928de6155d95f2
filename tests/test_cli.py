"""The command line (grader/cli.py): one block per verb, each verb's --help saying what it reads and
writes, and autograde's Options read from its arguments in one place."""
import pytest

from grader import cli
from grader.submission import Engine, Kernels
from support.cli import run_cli
from support.grading import A1, DUE


def _verbs():
    parser = cli.build_parser()
    [verbs] = [action for action in parser._actions if action.dest == "verb"]
    return verbs.choices


def test_every_verb_is_added_by_its_block_and_its_help_says_what_it_reads_and_writes():
    verbs = _verbs()
    assert list(verbs) == [add.__name__.removeprefix("add_") for add in cli.VERBS]
    for name, parser in verbs.items():
        assert getattr(cli, f"cmd_{name}") is parser.get_default("run"), name
        assert "\nreads:  " in parser.description and "\nwrites: " in parser.description, name


def test_autograde_options_come_from_its_arguments():
    args = cli.build_parser().parse_args(["autograde", A1, "download.zip", "--due", DUE.isoformat(), "--workers", "3",
                                          "--scheduler", "tcp://scheduler:8786", "--kernels", "cold",
                                          "--late-penalty", "10%/day", "--times", "p1.json", "--times", "p2.json"])
    options = cli.autograde_options(args)
    assert options.due == DUE and options.workers == 3 and options.kernels is Kernels.COLD
    assert options.engine is Engine.DASK, "a scheduler means Dask"
    assert options.times == ("p1.json", "p2.json") and options.sandboxed and options.late_penalty is not None
    assert cli.autograde_options(cli.build_parser().parse_args(["autograde", A1, "x"])).engine is Engine.THREADS


@pytest.mark.parametrize("argv, says", [
    (["autograde", A1, "download.zip", "--due", "the day after tomorrow"], "autograde: "),
    (["autograde", A1, "download.zip", "--workers", "0"], "workers must be at least 1"),
    (["autograde", "a0_nothing", "download.zip"], "unknown assignment(s): a0_nothing"),
])
def test_bad_arguments_say_what_is_wrong_before_anything_runs(tmp_path, argv, says):
    status, out, _ = run_cli(*argv, course=tmp_path / "course")
    assert isinstance(status, str) and says in status and out == ""
    assert not (tmp_path / "course").exists(), "nothing written"
