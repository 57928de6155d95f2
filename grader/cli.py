"""python -m grader VERB: one command per step of the instructor's workflow.

The course is found once, here (Course.find: $GRADER_COURSE_ROOT, else the folder holding
nbgrader_config.py and solutions/ at or above the current directory, else this checkout), and
passed to every step; `--course-dir` names another grading folder than <course>/course."""
import argparse
import sys
import textwrap
import time
from pathlib import Path

from . import lms, store
from .course import CELL_TIMEOUT_S, Course, CourseNotFound


def _ids(course, values):
    known = course.assignment_ids()
    unknown = [v for v in values if v not in known]
    if unknown:
        raise SystemExit(f"unknown assignment(s): {', '.join(unknown)}; known: {', '.join(known)}")
    return values or known


# ---- what several verbs share ----

def _grading_folder(parser):
    parser.add_argument("--course-dir", default=None, metavar="FOLDER",
                        help="the grading folder: gradebook, submitted/, autograded/, feedback/ (default: course/)")


def _verb(verbs, name, run, help, reads, writes):
    """Add the verb `name`, run by `run(course, args)`; its --help says what it does, then what it
    reads and what it writes (FOLDER: the grading folder, course/ unless --course-dir says another).
    Returns its parser, for its arguments."""
    parser = verbs.add_parser(name, help=help, formatter_class=argparse.RawDescriptionHelpFormatter,
                              description="\n".join([
                                  textwrap.fill(help, 79), "",
                                  textwrap.fill(reads, 79, initial_indent="reads:  ", subsequent_indent=" " * 8),
                                  textwrap.fill(writes, 79, initial_indent="writes: ", subsequent_indent=" " * 8)]))
    parser.set_defaults(run=run)
    return parser


# ---- sync ----

def add_sync(verbs):
    p = _verb(verbs, "sync", cmd_sync,
              help="refresh provided cells and the device helper in solutions/ (and, without ids, lectures/) from "
                   "grader/provided/",
              reads="grader/provided/, solutions/ and mutants/ (and lectures/)",
              writes="the provided cells of solutions/<id>/, a lab's copies of its assignment and answer key (and "
                     "the lectures' device helper and progress bar)")
    p.add_argument("ids", nargs="*")


def cmd_sync(course, args):
    from .release import sync_lectures, sync_provided
    for aid in _ids(course, args.ids):
        refreshed = sync_provided(course, aid)
        print(f"{aid}: " + (f"refreshed {', '.join(refreshed)}" if refreshed else "provided cells up to date"))
    if not args.ids:   # the lectures carry the device helper and the progress bar (grader/provided/)
        lectures = sync_lectures(course)
        print("lectures: " + (f"refreshed the device helper or progress bar in {', '.join(lectures)}" if lectures
                              else "device helper and progress bar up to date"))


# ---- release ----

def add_release(verbs):
    p = _verb(verbs, "release", cmd_release,
              help="regenerate assignments/ from solutions/ (always overwriting)",
              reads="solutions/<id>/",
              writes="assignments/<id>/ (deleted and written afresh) and the assignment's record in the gradebook")
    p.add_argument("ids", nargs="*")


def cmd_release(course, args):
    from .release import release
    for aid in _ids(course, args.ids):
        print(f"{aid}: released to {release(course, aid)}")


# ---- lab ----

def add_lab(verbs):
    p = _verb(verbs, "lab", cmd_lab,
              help="a debugging lab: show its bugs; with --from A --bugs x,y,z make a new one from assignment A and "
                   "the catalogue's mutants x, y, z",
              reads="solutions/<id>/ and mutants/ (with --from: solutions/ASSIGNMENT/)",
              writes="nothing; with --from: solutions/<id>/<id>.ipynb, a new lab; with --measure: the lab's metadata")
    p.add_argument("id")
    p.add_argument("--from", dest="new_from", metavar="ASSIGNMENT", help="make a new lab debugging this assignment")
    p.add_argument("--bugs", default="", help="the new lab's bugs: names in mutants/<ASSIGNMENT>.py, comma-separated")
    p.add_argument("--title", help="the new lab's title")
    p.add_argument("--measure", action="store_true", help="run each bug planted alone and record the test cells "
                   "it breaks in the lab's metadata (a rewrite of its definition loses them all)")


def cmd_lab(course, args):
    from .labs import describe, measure_breaks, new_lab
    _ids(course, [args.new_from or args.id])   # a new lab's assignment, or the lab shown
    if args.measure:
        for name, tests in measure_breaks(course, args.id).items():
            print(f"{args.id}: {name} breaks {', '.join(tests)}")
    if args.new_from:
        path = new_lab(course, args.id, args.new_from, args.bugs.split(","), args.title or f"Debugging lab: {args.id}")
        print(f"{args.id}: wrote {path}; write each bugged definition in the colleague's own hand (its fix region: "
              "the repaired lines, then the planted ones) and the answer key's symptom, evidence and effect "
              f"(metadata course.lab.key), then `python -m grader sync {args.id}`, "
              f"`python -m grader lab {args.id} --measure`, `python -m grader release {args.id}` and "
              f"`python -m grader check {args.id}`")
    print(describe(course, args.id))


# ---- check ----

def add_check(verbs):
    p = _verb(verbs, "check", cmd_check,
              help="quality gate: solution full, release zero, release fresh, mutants caught",
              reads="solutions/, assignments/, mutants/, alternatives/",
              writes="nothing (a report on stdout; exit 1 on a failure)")
    p.add_argument("ids", nargs="*")
    p.add_argument("--skip-release-run", action="store_true", help="skip (b), the kernel run of the release")
    p.add_argument("--device", default=None,
                   help="create the tests' tensors on this device, e.g. cuda (default: cpu)")
    p.add_argument("--quiet", action="store_true")


def cmd_check(course, args):
    from .gate import check_assignment, format_report
    ok = True
    for aid in _ids(course, args.ids):
        report = check_assignment(course, aid, run_release=not args.skip_release_run, progress=not args.quiet,
                                  device=args.device)
        print(format_report(report))
        ok &= report.ok
    print("check: " + ("all passed" if ok else "FAILED"))
    return 0 if ok else 1


# ---- autograde ----

def add_autograde(verbs):
    p = _verb(verbs, "autograde", cmd_autograde,
              help="grade an LMS download (zip or folder), nbgrader's submitted/ or exchange folder, or a folder of "
                   "notebooks",
              reads="SOURCE (an LMS download, a Classroom clone, a folder, or one notebook), "
                    "--times/--worksheet/--groups files, the roster, FOLDER/term.json",
              writes="FOLDER/gradebook.db (or GRADER_DB_URL), FOLDER/autograded/, FOLDER/outcomes/<id>.json, "
                     "FOLDER/term.json (a --late-penalty)")
    p.add_argument("id")
    p.add_argument("submissions", metavar="SOURCE")
    p.add_argument("--lms", default="auto", choices=lms.choices(),
                   help="how the download names files (default: auto, the preset that reads the most names); "
                        "classroom: the folder `gh classroom clone student-repos` writes, one git repository per "
                        "student, graded as of the last commit at or before --due")
    p.add_argument("--pattern", default=None, help="regular expression over each file's path in the download, "
                   "with named groups `student` and optionally `timestamp` (overrides --lms)")
    p.add_argument("--due", default=None, help="the due date, stored in the gradebook: '2026-10-01 23:59' "
                   "(this machine's time zone) or with an offset")
    p.add_argument("--times", default=None, action="append", metavar="FILE", help="when each student submitted: "
                   "Canvas's submissions API saved as JSON (one --times per page of it), or a CSV "
                   "`student,submitted_at` (the download's own file times are never used; without a time a "
                   "submission is 'time unknown', never late; a file that covers part of the download is "
                   "warned about)")
    p.add_argument("--worksheet", default=None, metavar="FILE", help="Moodle's grading worksheet (CSV, in "
                   "English, German, French or Spanish): each participant's submission time, name, e-mail, "
                   "extension and team (needed under blind marking and for team submissions)")
    p.add_argument("--groups", default=None, metavar="FILE", help="who is in each group, for a group assignment "
                   "(one file per group, graded for every member): a CSV `group,student`, Canvas's group set "
                   "export or Moodle's participants download with its Groups column")
    p.add_argument("--lms-timezone", default=None, metavar="ZONE", help="the time zone of times the LMS writes "
                   "without an offset, e.g. Europe/Berlin (default: this machine's)")
    p.add_argument("--late-penalty", default=None, help="none | zero | N%%/day (default: the rule given to the "
                   "last run, else nbgrader_config.py's late-submission plugin, which is none); kept for regrades "
                   "and the export, which applies it to the whole total")
    p.add_argument("--student", default=None, metavar="ID", help="grade only this student's submission in SOURCE "
                   "(a regrade: everyone else's grades stay; unchanged hand-graded cells keep their grade "
                   "unflagged); with SOURCE one notebook, whose it is")
    p.add_argument("--submitted-at", default=None, metavar="TIME", help="with SOURCE one notebook (a replacement "
                   "file): when it came, e.g. '2026-10-02 09:30' (else its time is unknown)")
    _grading_folder(p)
    p.add_argument("--cell-timeout", type=int, default=CELL_TIMEOUT_S,
                   help=f"seconds per cell (default {CELL_TIMEOUT_S})")
    p.add_argument("--total-timeout", type=int, default=None, help="seconds per notebook")
    p.add_argument("--workers", type=int, default=None,
                   help="submissions graded at once (default: the CPUs this process may use, a container's "
                        "CPU quota included)")
    p.add_argument("--unsandboxed", action="store_true", help="run kernels without bubblewrap (trusted only)")
    p.add_argument("--kernels", default="warm", choices=["warm", "cold"],
                   help="warm (default): each student's kernel is a fresh fork of a server that imported torch "
                        "once, in its own sandbox; cold: each kernel starts from scratch in bubblewrap")
    p.add_argument("--dask", action="store_true", help="grade on Dask distributed (a local cluster by default)")
    p.add_argument("--scheduler", default=None, help="address of a running Dask scheduler (implies --dask)")


def autograde_options(args):
    """The run's Options from autograde's arguments: the one place they are read (ValueError for a
    time, a zone, a penalty or a count it cannot take)."""
    from .submission import Options
    from .times import parse_time
    if args.late_penalty:
        from .late_policy import penalty_config  # imports nbgrader: only for a penalty given here
    return Options(sandboxed=not args.unsandboxed, kernels=args.kernels, engine="dask" if args.dask else "threads",
                   scheduler=args.scheduler, workers=args.workers, cell_timeout=args.cell_timeout,
                   total_timeout=args.total_timeout, lms=args.lms, pattern=args.pattern,
                   times=tuple(args.times) if args.times else None, worksheet=args.worksheet,
                   lms_timezone=args.lms_timezone, groups=args.groups, due=parse_time(args.due) if args.due else None,
                   late_penalty=penalty_config(args.late_penalty) if args.late_penalty else None,
                   student=args.student, submitted_at=parse_time(args.submitted_at) if args.submitted_at else None)


def cmd_autograde(course, args):
    from .sandbox import SandboxUnavailable, check_available
    [aid] = _ids(course, [args.id])
    started = time.time()
    try:
        if args.unsandboxed:
            print("WARNING: grading WITHOUT the sandbox: student code runs with your rights and can read "
                  "the hidden tests and the gradebook. Use only for trusted notebooks.", file=sys.stderr)
        options = autograde_options(args)
        if options.due:
            print(f"{aid}: due {options.due.astimezone():%Y-%m-%d %H:%M %Z} ({options.due:%Y-%m-%d %H:%M} UTC)")
        if options.late_penalty is not None:
            from .late_policy import describe_penalty
            print(f"{aid}: late penalty {describe_penalty(options.late_penalty)}")
        if options.sandboxed:
            check_available()   # the refusal comes before the pipeline (torch, nbgrader: seconds) is imported
        from .autograde import autograde, count_statuses, format_table
        graded = autograde(course, aid, args.submissions, options)
    except SandboxUnavailable as error:
        raise SystemExit(f"autograde: the sandbox is unavailable: {error}.\nRefusing to run student code "
                         "unsandboxed; pass --unsandboxed to do it anyway (trusted notebooks only).")
    except (FileNotFoundError, ValueError) as error:     # LmsRecordError is a ValueError
        raise SystemExit(f"autograde: {error}")
    print(format_table(aid, graded))
    counts = count_statuses(graded)
    print(", ".join(f"{n} {status}" for status, n in counts.items()) + f" in {time.time() - started:.1f} s")
    return 0


# ---- feedback ----

def add_feedback(verbs):
    p = _verb(verbs, "feedback", cmd_feedback,
              help="HTML feedback per student, hidden tests removed; --zip canvas|moodle also packs it for the LMS's "
                   "bulk upload",
              reads="FOLDER/autograded/ and the gradebook",
              writes="FOLDER/feedback/<student>/<id>/<id>.html, and with --zip one zip (--output)")
    p.add_argument("id")
    p.add_argument("--zip", default=None, choices=lms.feedback_zip_formats(), help="a zip for Canvas's Re-Upload "
                   "Submissions or Moodle's Upload multiple feedback files in a zip")
    p.add_argument("--output", default=None, help="the zip (default: course/ID-feedback-LMS.zip)")
    _grading_folder(p)


def cmd_feedback(course, args):
    from .feedback import FeedbackError, feedback_zip, generate_feedback
    [aid] = _ids(course, [args.id])
    skipped = []
    pages = generate_feedback(course, aid, skipped)
    for line in skipped:
        print(line, file=sys.stderr)
    print(f"{len(pages)} feedback pages in {store.feedback_dir(course)}")
    if args.zip:
        output = args.output or str(store.feedback_zip(course, aid, args.zip))
        try:
            path, count, notes = feedback_zip(course, aid, args.zip, output)
        except FeedbackError as error:
            raise SystemExit(f"feedback: {error}") from None
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
        print(f"{count} pages in {path}, named for {args.zip}'s bulk upload")


# ---- export ----

def add_export(verbs):
    p = _verb(verbs, "export", cmd_export,
              help="grades as CSV: long, wide (one row per student), canvas or moodle import",
              reads="the gradebook, the roster, FOLDER/term.json, FOLDER/outcomes/; --template: your Canvas "
                    "gradebook export",
              writes="one CSV (--output, default FOLDER/grades-FORMAT.csv); notes on stderr")
    p.add_argument("ids", nargs="*")
    p.add_argument("--format", default="long", choices=("long", "wide") + lms.export_formats())
    p.add_argument("--output", default=None, help="the CSV file (default: course/grades-FORMAT.csv)")
    p.add_argument("--template", default=None, metavar="GRADEBOOK.csv", help="canvas: your own Canvas gradebook "
                   "export, filled in (its assignment columns only, every other byte as Canvas wrote it)")
    p.add_argument("--map", action="append", metavar='ID="TITLE (12345)"', help="canvas --template: the "
                   "column an assignment goes into, when its title is not the assignment id")
    _grading_folder(p)


def cmd_export(course, args):
    from .export import export, parse_maps
    output = args.output or str(store.grades_csv(course, args.format))
    try:
        path, count, notes = export(course, output, args.format, assignment_ids=args.ids or None,
                                    template=args.template, maps=parse_maps(args.map))
    except ValueError as error:
        raise SystemExit(f"export: {error}")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"{count} rows written to {path} ({args.format})")


# ---- roster ----

def add_roster(verbs):
    p = _verb(verbs, "roster", cmd_roster,
              help="the class list: `roster import FILE.csv` (yours, Canvas's gradebook export or Moodle's "
                   "participants download), `roster show`, `roster drop ID...`",
              reads="import: your CSV, Canvas's gradebook export or Moodle's participants download",
              writes="the gradebook's students and FOLDER/roster.json")
    p.add_argument("action", choices=["import", "show", "drop"])
    p.add_argument("names", nargs="*", metavar="FILE or ID", help="import: the CSV file; drop: student ids")
    p.add_argument("--replace", action="store_true", help="import: the roster becomes exactly the file's "
                   "students; who is not in it is dropped (and named)")
    _grading_folder(p)


def cmd_roster(course, args):
    from .roster import RosterError, drop_students, format_roster, import_roster, load_roster
    try:
        if args.action == "import":
            if len(args.names) != 1:
                raise SystemExit("roster import: name one CSV file: your class list (id, first_name, last_name, "
                                 "email, lms_user_id), Canvas's gradebook export or Moodle's participants download")
            added, updated, form, dropped = import_roster(course, args.names[0], replace=args.replace)
            print(f"roster: read as {form}; {added} added, {updated} updated"
                  + (f", {len(dropped)} dropped ({', '.join(dropped)})" if dropped else "")
                  + f"; {len(load_roster(course))} students on the roster")
        elif args.action == "drop":
            if not args.names:
                raise SystemExit("roster drop: name the student ids to take off the roster")
            drop_students(course, args.names)
            print(f"roster: dropped {', '.join(args.names)} (their grades stay in the gradebook); "
                  f"{len(load_roster(course))} students on the roster")
        else:
            students = load_roster(course)
            if students is None:
                raise SystemExit("no roster imported yet: python -m grader roster import FILE.csv")
            print(format_roster(students))
    except RosterError as error:
        raise SystemExit(f"roster {args.action}: {error}") from None


# ---- extension ----

def add_extension(verbs):
    p = _verb(verbs, "extension", cmd_extension,
              help="a student's own due date for one assignment, before or after grading: a graded submission's "
                   "lateness and penalty change at once",
              reads="FOLDER/term.json and the gradebook",
              writes="FOLDER/term.json, the student's submission in the gradebook (extension, penalty) and "
                     "FOLDER/outcomes/<id>.json")
    p.add_argument("id")
    p.add_argument("student")
    when = p.add_mutually_exclusive_group(required=True)
    when.add_argument("--until", default=None, metavar="DATE", help="the student's due date: '2026-10-03 23:59' "
                      "(this machine's time zone) or with an offset")
    when.add_argument("--days", type=float, default=None, help="days past the assignment's due date")
    when.add_argument("--remove", action="store_true", help="take the extension back")
    _grading_folder(p)


def cmd_extension(course, args):
    from .late_policy import reapply
    from .term import TermError, record_extension, remove_extension
    from .times import parse_time
    [aid] = _ids(course, [args.id])
    try:
        if args.remove:
            remove_extension(course, aid, args.student)
        else:
            until = parse_time(args.until) if args.until else None
            record_extension(course, aid, args.student, until=until, days=args.days)
    except (TermError, ValueError) as error:
        raise SystemExit(f"extension: {error}") from None
    result = reapply(course, aid, args.student)
    due = f"due {result['due'].astimezone():%Y-%m-%d %H:%M %Z}" if result["due"] else \
        "no due date stored yet (autograde --due sets it; the extension applies then)"
    what = "extension removed" if args.remove else "extension granted"
    print(f"{aid}: {what} for {args.student}: {due}")
    if not result["graded"]:
        print(f"{aid}: {args.student} is not graded yet; autograde applies it")
    elif result["seconds_late"] is None:
        print(f"{aid}: {args.student}'s submission time is unknown: not late")
    else:
        state = f"late {result['seconds_late'] / 3600:.1f} h" if result["late"] else "on time"
        print(f"{aid}: {args.student} is now {state}; late penalty {result['penalty_before']:g} -> "
              f"{result['penalty']:g} points (the export applies the rule to the whole total)")


# ---- excuse ----

def add_excuse(verbs):
    p = _verb(verbs, "excuse", cmd_excuse,
              help="students not expected to submit one assignment: never missing, EX in the Canvas export, left out "
                   "of Moodle's (grades kept)",
              reads="the roster (or the gradebook's students)",
              writes="FOLDER/term.json (and removes a 'missing' outcome)")
    p.add_argument("id")
    p.add_argument("students", nargs="+", metavar="STUDENT")
    p.add_argument("--undo", action="store_true", help="take the excuse back")
    _grading_folder(p)


def cmd_excuse(course, args):
    from .term import TermError, excuse
    [aid] = _ids(course, [args.id])
    try:
        for student in args.students:
            excuse(course, aid, student, undo=args.undo)
    except TermError as error:
        raise SystemExit(f"excuse: {error}") from None
    print(f"{aid}: " + ("no longer excused" if args.undo else "excused") + f": {', '.join(args.students)}"
          + ("" if args.undo else " (never missing; EX in the Canvas export, left out of Moodle's)"))


# ---- report ----

def add_report(verbs):
    p = _verb(verbs, "report", cmd_report,
              help="class report: score histogram, failure rate per test, not graded",
              reads="FOLDER/outcomes/<id>.json and assignments/<id>/",
              writes="FOLDER/reports/<id>.html")
    p.add_argument("id")
    _grading_folder(p)


def cmd_report(course, args):
    from .report import build_report
    [aid] = _ids(course, [args.id])
    try:
        print(f"report written to {build_report(course, aid)}")
    except FileNotFoundError as error:
        raise SystemExit(f"report: {error}")


# ---- similarity ----

def add_similarity(verbs):
    p = _verb(verbs, "similarity", cmd_similarity,
              help="how alike the graded submissions' code is, pair by pair (given code left out): an HTML report of "
                   "the pairs above a threshold, side by side, and a CSV; evidence to read, never a verdict",
              reads="FOLDER/outcomes/<id>.json, FOLDER/autograded/<student>/<id>/, assignments/<id>/ (and a lab's "
                    "solutions/<id>/)",
              writes="FOLDER/similarity/<id>.html and FOLDER/similarity/<id>.csv")
    p.add_argument("id")
    p.add_argument("--threshold", type=float, default=None, metavar="PERCENT", help="flag a pair when this share "
                   "of either side's own code matches the other (default 50); for a7, whose Triton kernels share their "
                   "idioms whoever writes them, 75")
    p.add_argument("--min-tokens", type=int, default=None, help="and the matching code holds at least this many "
                   "tokens (default 100, about four lines)")
    _grading_folder(p)


def cmd_similarity(course, args):
    from .similarity import check_similarity
    [aid] = _ids(course, [args.id])
    try:
        chosen = {"threshold": args.threshold, "min_tokens": args.min_tokens}
        result = check_similarity(course, aid, **{name: value for name, value in chosen.items() if value is not None})
    except FileNotFoundError as error:
        raise SystemExit(f"similarity: {error}")
    print(f"{aid}: {len(result.works)} submissions compared ({len(result.pairs)} pairs) in {result.seconds:.1f} s; "
          f"{len(result.flagged)} pairs at {result.threshold:g}% or more (evidence to read, never a verdict)")
    for who, why in result.not_compared:
        print(f"not compared: {who}: {why}")
    print(f"report: {result.html_path}\nCSV: {result.csv_path}")


# ---- publish ----

def add_publish(verbs):
    p = _verb(verbs, "publish", cmd_publish,
              help="write the student-facing course (no answer key) as a repository in DEST",
              reads="lectures/, assignments/<id>/, docs/student-readme.md, docs/syllabus.md, docs/img/, "
                    "requirements-student.txt",
              writes="DEST: a fresh tree and a commit (its .git and history kept)")
    p.add_argument("dest")
    p.add_argument("--force", action="store_true", help="replace DEST if it exists")
    p.add_argument("ids", nargs="*", help="the assignments to publish (default: every released one)")


def cmd_publish(course, args):
    from .publish import publish
    return publish(course, Path(args.dest), force=args.force, assignments=args.ids or None)


# ---- demo ----

def add_demo(verbs):
    p = _verb(verbs, "demo", cmd_demo,
              help="release, grade sample submissions, feedback, CSV, in out/demo/",
              reads="solutions/, assignments/, mutants/",
              writes="out/demo/ only (never course/ or assignments/)")
    p.add_argument("ids", nargs="*")


def cmd_demo(course, args):
    from .demo import run_demo
    return 0 if run_demo(course, _ids(course, args.ids)) else 1


# ---- gradescope ----

def add_gradescope(verbs):
    p = _verb(verbs, "gradescope", cmd_gradescope,
              help="a Gradescope autograder zip for one assignment: setup.sh, run_autograder (this course's pipeline "
                   "into results.json), the grader, the hidden tests (docs/gradescope.md)",
              reads="solutions/ID/ (the hidden tests), assignments/ID/ (the release), grader/, nbgrader_config.py, "
                    "requirements.txt, constraints.txt",
              writes="one zip (--output, default FOLDER/ID-autograder.zip) holding setup.sh, run_autograder and what "
                     "they need")
    p.add_argument("id")
    p.add_argument("--output", default=None, metavar="ZIP", help="the zip to write (default: course/ID-autograder.zip)")
    p.add_argument("--hidden-visibility", default="after_published",
                   choices=["visible", "hidden", "after_due_date", "after_published"],
                   help="when students see the result of a test cell holding hidden checks (default: "
                        "after_published); the other tests are always visible")


def cmd_gradescope(course, args):
    from .gradescope import GradescopeError, build_zip
    [aid] = _ids(course, [args.id])
    if args.output:
        output = Path(args.output)
    else:
        output = store.autograder_zip(course, aid)
        output.parent.mkdir(parents=True, exist_ok=True)
    started = time.time()
    try:
        path, count = build_zip(course, aid, output, hidden_visibility=args.hidden_visibility)
    except GradescopeError as error:
        raise SystemExit(f"gradescope: {error}") from None
    print(f"{aid}: Gradescope autograder written to {path} ({count} files, {path.stat().st_size / 1e6:.1f} MB, "
          f"{time.time() - started:.1f} s); upload it as the assignment's autograder (docs/gradescope.md)")


# ---- the command line ----

# each adds its verb, in the order --help lists them
VERBS = (add_sync, add_release, add_lab, add_check, add_autograde, add_feedback, add_export, add_roster,
         add_extension, add_excuse, add_report, add_similarity, add_publish, add_demo, add_gradescope)


def build_parser():
    """The command line: one sub-command (verb) per step of the workflow, each added by its block above."""
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    for add in VERBS:
        add(verbs)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    try:
        course = Course.find(grading_dir=getattr(args, "course_dir", None))
    except CourseNotFound as error:
        raise SystemExit(f"grader: {error}") from None
    import logging
    logging.getLogger("traitlets").setLevel(logging.WARNING)   # nbgrader's INFO lines are noise here
    from .labs import LabError
    from .release import ReleaseError
    try:
        return args.run(course, args) or 0
    except (LabError, ReleaseError) as error:   # a lab or release that cannot be made says why, in a line
        raise SystemExit(f"grader: {error}") from None


if __name__ == "__main__":
    sys.exit(main())
