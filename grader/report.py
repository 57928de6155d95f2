"""`report ID`: one HTML page for the instructor — the score histogram, how often each test
fails (which mistakes the class makes), one row per student, and the submissions that could not
be graded."""
import base64
import html
import io

from . import cells, labs, store
from .submission import Status


def _png(figure):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buffer.getvalue()).decode()


def class_figure(scores, not_graded, tests, rates, max_score):
    """Left: how many students got each score; right: the fraction failing each test. The panels'
    widths follow the test names' length (constrained layout), so no label runs into a plot."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    names = [test for test, _ in tests]
    label_inches = 0.075 * max((len(name) for name in names), default=10)
    figure, (left, right) = plt.subplots(1, 2, figsize=(10 + label_inches, 0.8 + max(3.0, 0.28 * len(names))),
                                         layout="constrained")
    left.hist(scores, bins=range(0, int(max_score) + 2), color="#4c72b0", align="left")
    left.set_xlabel(f"auto-graded score (of {max_score:g})")
    left.set_ylabel("students")
    left.yaxis.set_major_locator(MaxNLocator(integer=True))     # counts: whole students
    left.xaxis.set_major_locator(MaxNLocator(integer=True))
    left.set_title(f"{len(scores)} graded, {not_graded} not graded")
    right.barh(names[::-1], rates[::-1], color="#dd8452")
    right.set_xlim(0, 1)
    right.set_xlabel("fraction of graded students failing")
    right.set_title("which tests the class fails")
    return figure


def _late(outcome):
    """'late 30.0 h, -3.6 points', 'on time', 'time unknown' (a due date but no time), or '' (no due
    date)."""
    if outcome.get("time_unknown"):
        return "late (the LMS says), time unknown" if outcome.get("late") else "time unknown"
    if outcome.get("late") is None:
        return ""
    if not outcome["late"]:
        return "on time"
    seconds = outcome.get("seconds_late")
    text = "late" + (f" {seconds / 3600:.1f} h" if seconds else "")
    return text + (f", -{outcome['penalty']:g} points" if outcome.get("penalty") else "")


def build_report(course, assignment_id):
    """<grading folder>/reports/<id>.html from the saved outcomes of the last autograde runs."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    outcomes = list(store.load_outcomes(course, assignment_id).values())
    graded = [o for o in outcomes if o["status"] == Status.GRADED]
    not_graded = [o for o in outcomes if o["status"] != Status.GRADED]
    released = cells.read(course.release_notebook(assignment_id))
    tests = list(cells.test_points(released).items())
    max_score = sum(points for _, points in tests)

    rates = [sum(test in o["failed"] for o in graded) / max(len(graded), 1) for test, _ in tests]
    figure = class_figure([o["score"] for o in graded], len(not_graded), tests, rates, max_score)
    image = _png(figure)
    plt.close(figure)

    rows = "".join(f"<tr><td>{html.escape(test)}</td><td>{points:g}</td><td>{rate:.0%}</td></tr>"
                   for (test, points), rate in sorted(zip(tests, rates), key=lambda item: -item[1]))
    students = "".join(
        f"<tr><td>{html.escape(o['student'])}</td><td>{o['score']:g} / {max_score:g}</td>"
        f"<td>{html.escape(', '.join(o['failed']) or '-')}</td><td>{_late(o)}</td></tr>"
        if o["status"] == Status.GRADED else
        f"<tr><td>{html.escape(o['student'])}</td><td>{html.escape(o['status'])}</td><td>{html.escape(o['reason'])}</td>"
        f"<td>{_late(o)}</td></tr>"
        for o in sorted(outcomes, key=lambda o: o["student"]))
    missing = "".join(f"<tr><td>{html.escape(o['student'])}</td><td>{html.escape(o['reason'])}</td></tr>"
                      for o in sorted(not_graded, key=lambda o: o["student"])) or "<tr><td colspan=2>none</td></tr>"
    mean = sum(o["score"] for o in graded) / len(graded) if graded else 0.0
    bugs = lab_table(course, assignment_id, graded) if labs.is_lab(course, assignment_id) else ""
    page = f"""<!doctype html><html lang="en"><meta charset="utf-8"><title>{assignment_id}: class report</title>
<style>body{{font-family:sans-serif;max-width:1000px;margin:2em auto}}td,th{{padding:2px 12px;text-align:left}}</style>
<main><h1>{assignment_id}: class report</h1>
<p>{len(outcomes)} submissions; mean auto-graded score {mean:.1f} / {max_score:g}.</p>
<img alt="score histogram and failure rates" src="data:image/png;base64,{image}" style="max-width:100%">
{bugs}<h2>Failure rate per test</h2><table><tr><th scope="col">test</th><th scope="col">points</th>
<th scope="col">failed by</th></tr>{rows}</table>
<h2>Not graded</h2><table><tr><th scope="col">student</th><th scope="col">reason</th></tr>{missing}</table>
<h2>Students</h2><table><tr><th scope="col">student</th><th scope="col">auto-graded score</th>
<th scope="col">failed tests</th><th scope="col">late</th></tr>
{students}</table></main>
</html>
"""
    target = store.report_page(course, assignment_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page)
    return target


def lab_table(course, assignment_id, graded):
    """A debugging lab's bugs: how many graded students repaired each one, who missed it, and who
    rewrote its definition instead of repairing it (its tests then pay nothing)."""
    bugs = labs.lab_bugs(course, assignment_id)
    missed_by = {bug.name: [] for bug in bugs}
    rewritten_by = {bug.name: [] for bug in bugs}
    for outcome in graded:
        repairs = labs.student_repairs(course, assignment_id, outcome["student"], bugs)
        _, missed, rewritten, _ = labs.bug_outcome(bugs, outcome["failed"], repairs)
        for bug in missed:
            missed_by[bug.name].append(outcome["student"])
        for bug in rewritten:
            rewritten_by[bug.name].append(outcome["student"])
    rows = "".join(
        f"<tr><td>{bug.number}</td><td><code>{html.escape(bug.replaces)}</code>: {html.escape(bug.description)}</td>"
        f"<td>{html.escape(', '.join(bug.tests))}</td>"
        f"<td>{len(graded) - len(missed_by[bug.name]) - len(rewritten_by[bug.name])} of {len(graded)}</td>"
        f"<td>{html.escape(', '.join(sorted(missed_by[bug.name])) or '-')}</td>"
        f"<td>{html.escape(', '.join(sorted(rewritten_by[bug.name])) or '-')}</td></tr>" for bug in bugs)
    return ('<h2>Bugs repaired by the class</h2><table><tr><th scope="col">bug</th><th scope="col">what it is</th>'
            '<th scope="col">its tests</th><th scope="col">repaired by</th><th scope="col">missed by</th>'
            f'<th scope="col">rewritten by</th></tr>{rows}</table>')
