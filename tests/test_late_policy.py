"""The late-penalty rules (grader/late_policy.py): the per-day plugin, the CLI's options and the
course's nbgrader configuration, and the points a rule takes. Fast: no submission is graded (the
late stage that applies them: tests/stages/test_late.py)."""
import pytest
from traitlets.config import Config

from grader.late_policy import PerDayPenalty, describe_penalty, penalty_config, penalty_points


def test_per_day_penalty_counts_started_days_up_to_its_cap():
    plugin = PerDayPenalty(percent_per_day=10, max_percent=30)
    assert plugin.late_submission_penalty("s", 20, 1) == 2            # one second: one started day
    assert plugin.late_submission_penalty("s", 20, 86400) == 2
    assert plugin.late_submission_penalty("s", 20, 86401) == 4
    assert plugin.late_submission_penalty("s", 20, 10 * 86400) == 6   # capped at 30 %


def test_the_options_and_the_course_configuration():
    assert describe_penalty(penalty_config("10%/day")) == "10% per started day late"
    assert describe_penalty(penalty_config("zero")) == "zero (late work scores 0)"
    assert describe_penalty(penalty_config("none")) == "none (late work is flagged only)"
    with pytest.raises(ValueError, match="expected none, zero or a share per day like 10%/day"):
        penalty_config("a lot")
    course = Config()
    course.AssignLatePenalties.plugin_class = "grader.stages.late.PerDayPenalty"
    course.PerDayPenalty.percent_per_day = 5
    course.Exchange.root = "/elsewhere"
    taken = penalty_config(course_config=course)
    assert describe_penalty(taken) == "5% per started day late" and "Exchange" not in taken
    assert describe_penalty(penalty_config(course_config=None)) == "none (late work is flagged only)"


@pytest.mark.parametrize("plugin", ["grader.late_policy.PerDayPenalty", "grader.stages.late.PerDayPenalty"])
def test_a_course_configuration_names_the_plugin_by_either_path(plugin):
    """nbgrader imports the plugin by the name nbgrader_config.py gives; a configuration written when
    the rules lived in the stage's module keeps working."""
    course = Config()
    course.AssignLatePenalties.plugin_class = plugin
    course.PerDayPenalty.percent_per_day = 5
    config = penalty_config(course_config=course)
    assert penalty_points(config, "ada", 20.0, 2 * 86400 - 1) == pytest.approx(2.0)   # two started days, 5 % each
    assert penalty_points(config, "ada", 20.0, 0) == 0.0


def test_the_points_taken_never_exceed_the_score():
    assert penalty_points(penalty_config("zero"), "ada", 12.5, 3600) == 12.5
    assert penalty_points(penalty_config("none"), "ada", 12.5, 3600) == 0.0
    assert penalty_points(penalty_config("60%/day"), "ada", 10.0, 3 * 86400) == 10.0
