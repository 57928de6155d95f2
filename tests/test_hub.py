"""The whole course loop on a real multi-user JupyterHub with two courses and two graders, in
Debian's Chromium.

deploy/jupyterhub/hub.py (what `make hub` runs) starts JupyterHub with configurable-http-proxy on a
free port of 127.0.0.1 and the accounts of deploy/jupyterhub/users.txt as local system users (made
by users.sh; the ones this test had to make are removed afterwards): the course attention-course
with its grader account (it owns the course and runs the course's Formgrader as the JupyterHub
service /services/attention-course/), an `instructor` and a `ta` who both grade through that
service, `student-a` and `student-b`; and the course attention-seminar beside it, with its own
grader account and `student-c`. nbgrader's exchange is a shared folder (a fresh test one), one
folder per course that only the course's members can enter. Then, each step with a screenshot under
out/hub/ (checked not blank) and its expected text checked in the page:

  1. the instructor logs in: their own Nbgrader menu has the Course List, not the Formgrader nor the
     Assignments list; the Course List links the course's Formgrader, the grader account's service;
  2. the instructor releases a1 from the service's Formgrader (nbgrader's exchange: the permissions
     it documents, the course's folder 0750 for its members); the seminar releases a2 beside it;
  3. student A logs in (Assignments only; no Formgrader, server side either), sees a1 of their course
     and nothing of the seminar, fetches a1, fills in a correct solution (the solved notebook is
     written into the fetched folder as student A: typing it would add minutes and test nothing of
     the hub), opens it, Validates ("Success!"), submits; student C (the seminar) lists a2 only;
  4. student B fetches and submits a buggy a1 (the catalogued mutant vectorised_not_a_loop: it passes the
     visible tests, so Validate says "Success!", and only the hidden tests catch it);
  5. the instructor collects in the service's Formgrader;
  6. student B, in a terminal on the hub, is refused ("Permission denied") listing the exchange's
     inbound folder, the seminar's folder, the TA's and student C's homes, and reading student A's
     notebook, A's collected submission, the course's source and the mutant catalogue (each shown to
     exist by its owner);
     the hub refuses B A's server and the course's Formgrader service;
  7. the TA logs in, opens a terminal in the course's service (as the grader account) and grades
     there with the sandboxed pipeline (`python -m grader autograde a1_self_attention course/submitted`,
     then `python -m grader feedback`; as root only where bubblewrap cannot start for an
     unprivileged user, and it says so), sees the scores in the Formgrader and releases the feedback;
     the instructor's Formgrader shows the same scores (one gradebook);
  8. student A fetches feedback: every auto-graded cell at full marks; student B's shows the hidden
     test's failing message and not a line of the hidden tests' source.

Stopping the hub then stops each course's service on JupyterHub's first signal, SIGINT, though the
hub runs with SIGINT ignored, as a job a script starts in the background has it (no service waits
JupyterHub's interrupt_timeout for SIGTERM).

Needs the hub (`sudo make system-deps`: Chromium, Playwright, deploy/jupyterhub/install.sh, bubblewrap)
and root or passwordless sudo; without them the tests are skipped, unless REQUIRE_HUB=1 (CI) makes them fail.
"""
import json
import re
import time

import pytest

from support import COURSE
from support.browser import CHROMIUM, CHROMIUM_ARGS, check_screenshot
from support.hub import REPO, RunningHub, deploy
from support.waiting import wait_until

pytestmark = [pytest.mark.hub, pytest.mark.sandbox]

AID = "a1_self_attention"
SHOTS = REPO / "out" / "hub"
INSTRUCTOR = deploy.instructor()
COURSE_ID = deploy.course_of(INSTRUCTOR)
GRADER = deploy.grader_account(COURSE_ID)                    # the course's shared grader account
TA = deploy.members(COURSE_ID, "ta")[0]
STUDENT_A, STUDENT_B = deploy.students(COURSE_ID)[:2]
OTHER_COURSE = next(course for course in deploy.courses() if course != COURSE_ID)
OTHER_STUDENT = deploy.students(OTHER_COURSE)[0]
OTHER_AID = "a2_multihead_masking"                          # what the other course releases
# mutants/a1_self_attention.py: passes every visible test, fails a hidden one (the loop check)
BUG = "vectorised_not_a_loop"
BUG_CELL = "test_attention_loop"
BUG_MESSAGE = "a loop over the queries: 10 queries run at least 8 more torch operations"  # the hidden check's message
BUG_HINT = "write an explicit Python loop over the queries"                                # ... and its hint
HIDDEN_SOURCE = ["BEGIN HIDDEN TESTS", "END HIDDEN TESTS", "def _reference_pe", "class _CountTorchCalls",
                 "sinusoidal_positional_encoding(20, 8, base=100.0)"]


def auto_points():
    """{grade id: points} of the auto-graded (test) cells of the release, and the total with the
    hand-graded written answers."""
    nb = json.loads((REPO / "assignments" / AID / f"{AID}.ipynb").read_text())
    graded = [c for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")]
    tests = {c["metadata"]["nbgrader"]["grade_id"]: float(c["metadata"]["nbgrader"]["points"])
             for c in graded if c["cell_type"] == "code" and not c["metadata"]["nbgrader"].get("solution")}
    return tests, sum(float(c["metadata"]["nbgrader"]["points"]) for c in graded)


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    SHOTS.mkdir(parents=True, exist_ok=True)
    for old in SHOTS.glob("*.png"):
        old.unlink()
    running = RunningHub(tmp_path_factory.mktemp("hub"), SHOTS / "jupyterhub.log")
    try:
        running.start()
        yield running
    finally:
        running.stop()
    sent = running.services_sent_sigterm()
    assert sent == 0, (f"{sent} course service(s) ignored JupyterHub's SIGINT and were stopped with SIGTERM "
                       f"after its interrupt_timeout (jupyterhub_config.py SERVICE_SERVER; log {running.log_path})")


@pytest.fixture(scope="module")
def browser(hub):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


# ---------------------------------------------------------------- helpers

def shot(page, name, full_page=False):
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    check_screenshot(path)
    return path


LOGIN_SUBMITTED = {}   # user: when start_login submitted their login (time.monotonic())


def start_login(browser, hub, user):
    """A fresh browser context (its own cookies) submitting user's login; returns the page, on which the
    hub spawns the user's server and then loads JupyterLab, in the browser, while the test goes on
    with another user (login_done waits for it)."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    page.set_default_timeout(90_000)
    LOGIN_SUBMITTED[user] = time.monotonic()
    page.goto(f"{hub.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", hub.passwords[user])
    page.click("#login_submit")
    return page


def login_done(page, user):
    """The page of start_login once on the user's JupyterLab, its menus loaded."""
    page.wait_for_url(f"**/user/{user}/lab**", timeout=150_000)   # the hub spawns the server first
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").wait_for(timeout=120_000)
    print(f"{user}: logged in, server spawned, JupyterLab ready {time.monotonic() - LOGIN_SUBMITTED[user]:.1f} s after "
          "submitting the login")
    return page


def login(browser, hub, user):
    """A fresh browser context logged in as user; returns the page on JupyterLab."""
    return login_done(start_login(browser, hub, user), user)


def nbgrader_menu(page):
    """Open the Nbgrader menu; returns its item labels."""
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").click()
    menu = page.locator(".lm-Menu").last
    menu.wait_for()
    return [label.strip() for label in menu.locator(".lm-Menu-itemLabel").all_inner_texts() if label.strip()]


def open_assignments(page):
    items = nbgrader_menu(page)
    assert "Assignment List" in items, f"a student's Nbgrader menu has no Assignment List: {items}"
    page.locator(".lm-Menu-itemLabel", has_text="Assignment List").click()
    page.locator("#released_assignments_list").wait_for()
    page.locator("#released_assignments_list_loading").wait_for(state="hidden")


def formgrader(page, hub, path=""):
    """The course's Formgrader: the grader account's service, shared by the instructor and the TA."""
    page.goto(f"{hub.url}/services/{COURSE_ID}/formgrader{path}")


def formgrader_action(page, css_class):
    """Click the a1 row's button in the Formgrader's Manage Assignments table; returns the modal's text."""
    row = page.locator("tr", has_text=AID)
    row.locator(f".{css_class} a").click()
    modal = page.locator("#success-modal, #error-modal").first
    modal.wait_for(timeout=120_000)
    text = modal.inner_text()
    return modal, text


def close_modal(page, modal):
    modal.locator(".modal-footer button").first.click()
    modal.wait_for(state="hidden")


def validate_from_list(page):
    page.locator("#fetched_assignments_list .assignment-notebooks-link").first.click()
    page.locator("#fetched_assignments_list button", has_text="Validate").click()
    dialog = page.locator(".jp-Dialog", has_text="Validation Results")
    dialog.wait_for(timeout=180_000)
    return dialog


def fetch(page):
    page.locator("#released_assignments_list > .list_item", has_text=AID).locator("button", has_text="Fetch").click()
    page.locator("#fetched_assignments_list > .list_item", has_text=AID).wait_for()


def submit(page):
    fetched = page.locator("#fetched_assignments_list > .list_item", has_text=AID)
    fetched.locator("button", has_text="Submit").first.click()
    submitted = page.locator("#submitted_assignments_list > .list_item", has_text=AID)
    submitted.wait_for()
    text = submitted.inner_text()
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", text), f"no submission timestamp shown: {text!r}"
    return text


def open_terminal(page, base):
    """File > New > Terminal in the JupyterLab at `base` (a user's server or a service); returns the
    terminal's locator once its prompt shows."""
    page.goto(f"{base}/lab")
    page.locator(".lm-MenuBar-itemLabel", has_text="File").click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^New$")).hover()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Terminal$")).click()
    terminal = page.locator(".jp-Terminal").last
    terminal.locator(".xterm-helper-textarea").wait_for(state="attached")
    return terminal


def paste(terminal, text):
    """Paste text into a terminal, as a user pastes a long command (the browser's paste event, which
    xterm.js reads; typing it key by key takes Playwright seconds)."""
    terminal.locator(".xterm-helper-textarea").evaluate(
        """(area, text) => {
            const data = new DataTransfer();
            data.setData("text/plain", text);
            area.dispatchEvent(new ClipboardEvent("paste", {clipboardData: data, bubbles: true, cancelable: true}));
        }""", text)


def terminal_lines(terminal):
    return [line.strip() for line in terminal.locator(".xterm-accessibility-tree").inner_text().splitlines()]


def put_notebook(hub, user, nb):
    """The student's notebook, written as that student into their fetched folder."""
    import nbformat

    target = f"{AID}/{AID}.ipynb"
    result = hub.as_user(user, ["sh", "-c", 'cat > "$1"', "sh", target], input=nbformat.writes(nb))
    assert result.returncode == 0, f"could not write {target} as {user}: {result.stderr}"


def grade_cells(text):
    """{grade id: (score, max)} from a feedback page's text ("Grade cell: test_x Score: 2.0 / 2.0")."""
    return {m.group(1): (float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"Grade cell: (\w+)\s+Score: ([0-9.]+) / ([0-9.]+)", text)}


def open_feedback(page, hub, user):
    """Assignments -> Fetch Feedback -> (view feedback), then the page itself in the browser tab."""
    page.goto(f"{hub.url}/user/{user}/lab")
    page.locator(".lm-MenuBar-itemLabel", has_text="Nbgrader").wait_for()
    open_assignments(page)
    row = page.locator("#submitted_assignments_list > .list_item", has_text=AID).first
    row.locator("button", has_text="Fetch Feedback").click()
    link = page.locator("#submitted_assignments_list a", has_text="view feedback")
    link.wait_for(timeout=60_000)
    link.click()   # the file browser goes to the feedback folder ...
    page.wait_for_url(f"**/user/{user}/lab/tree/{AID}/feedback/**")
    page.locator(".jp-DirListing-item", has_text=f"{AID}.html").wait_for()
    # ... and the page opens in the browser tab (the file browser's "Open in New Browser Tab")
    return page.url.split("?")[0].replace(f"/user/{user}/lab/tree/", f"/user/{user}/files/") + f"/{AID}.html"


# ---------------------------------------------------------------- the tests

class Walk:
    """What the walk-through's first half (steps 1 to 5) leaves to its second (6 to 8): the browser pages
    of each account, and how long each step took (printed at the end: where the time goes)."""

    def __init__(self):
        self.started = self.last = time.monotonic()
        self.laps, self.pages, self.collected = [], {}, False

    def step_done(self, number):
        now = time.monotonic()
        self.laps.append(f"{number}: {now - self.last:.1f} s")
        self.last = now


@pytest.fixture(scope="module")
def walk(hub, browser):
    return Walk()


# The walk-through is two tests, one after the other on the same hub (pytest runs a module's tests in
# order, and pytest-xdist keeps a module on one worker): each half takes about a minute.

def test_course_loop_on_jupyterhub_release_submit_collect(hub, browser, walk):
    print(f"\nhub started in {hub.startup_s:.1f} s at {hub.url}")
    step_done = walk.step_done

    # 1. the instructor: their own server lists the course (Course List); the Formgrader is the course's
    #    service, run by the grader account
    instructor = login(browser, hub, INSTRUCTOR)
    student_a = start_login(browser, hub, STUDENT_A)   # A's server starts while the instructor works
    items = nbgrader_menu(instructor)
    assert "Course List" in items and not {"Formgrader", "Assignment List"} & set(items), items
    shot(instructor, "01_instructor_nbgrader_menu")
    instructor.locator(".lm-Menu-itemLabel", has_text="Course List").click()
    listed = instructor.locator("#formgrader_list a", has_text=COURSE_ID)    # nbgrader's Course List finds the service
    listed.wait_for(timeout=60_000)
    assert f"/services/{COURSE_ID}/" in (listed.get_attribute("href") or ""), listed.get_attribute("href")
    shot(instructor, "01_instructor_course_list")

    step_done(1)

    # 2. release a1 to the exchange from the course's Formgrader; the other course releases a2 beside it
    formgrader(instructor, hub)
    instructor.locator("tr", has_text=AID).locator(".release a").wait_for()
    modal, text = formgrader_action(instructor, "release")
    assert f"Successfully released '{AID}'" in text, text
    assert str(hub.exchange / COURSE_ID / "outbound" / AID) in text, text
    shot(instructor, "02_instructor_released_a1")
    close_modal(instructor, modal)
    instructor.locator("tr", has_text=AID).locator(".label", has_text="released").wait_for()
    modes = {name: oct((hub.exchange / sub).stat().st_mode & 0o7777) for name, sub in [
        ("root", "."), ("course", COURSE_ID), ("outbound", f"{COURSE_ID}/outbound"),
        ("inbound", f"{COURSE_ID}/inbound")]}
    assert modes == {"root": "0o1777", "course": "0o750", "outbound": "0o755", "inbound": "0o2733"}, modes
    other = deploy.course_folder(OTHER_COURSE)
    released = hub.as_user(deploy.grader_account(OTHER_COURSE), ["nbgrader", "release_assignment", OTHER_AID],
                           cwd=other)
    assert released.returncode == 0, f"the other course could not release {OTHER_AID}:\n{released.stderr}"

    step_done(2)

    # 3. student A: Assignments only, their course's a1 and nothing of the other course, fetch, a
    #    correct solution, Validate, submit
    from playwright.sync_api import expect

    from grader.samples import buggy_submission, perfect_submission

    login_done(student_a, STUDENT_A)
    student_b = start_login(browser, hub, STUDENT_B)   # B's server starts while A works
    items = nbgrader_menu(student_a)
    assert "Formgrader" not in items and "Course List" not in items, f"a student sees instructor tools: {items}"
    student_a.keyboard.press("Escape")
    response = student_a.request.get(f"{hub.url}/user/{STUDENT_A}/formgrader")
    assert response.status == 404, f"a student's server answers the Formgrader with {response.status}"
    open_assignments(student_a)
    student_a.locator("#released_assignments_list > .list_item", has_text=AID).wait_for()
    listed = student_a.locator("#released_assignments_list").inner_text()
    assert COURSE_ID in listed, listed
    assert OTHER_COURSE not in listed and OTHER_AID not in listed, f"student A sees the other course: {listed}"
    shot(student_a, "03_student_a_assignments_released")
    fetch(student_a)
    shot(student_a, "04_student_a_fetched")
    # the other course's student lists that course's assignment only (nbgrader list, what the
    # Assignments tab asks), and cannot enter this course's folder of the exchange
    listing = hub.as_user(OTHER_STUDENT, ["nbgrader", "list"])
    assert f"{OTHER_COURSE} {OTHER_AID}" in listing.stdout + listing.stderr, listing.stdout + listing.stderr
    assert AID not in listing.stdout + listing.stderr, listing.stdout + listing.stderr
    refused = hub.as_user(OTHER_STUDENT, ["ls", hub.exchange / COURSE_ID])
    assert refused.returncode != 0 and "Permission denied" in refused.stderr, refused

    solved = perfect_submission(COURSE, AID)
    sdpa = next(c.source for c in solved.cells if "def scaled_dot_product_attention" in c.source)
    sdpa_return = next(line.strip() for line in reversed(sdpa.splitlines()) if line.strip().startswith("return"))
    put_notebook(hub, STUDENT_A, solved)
    student_a.goto(f"{hub.url}/user/{STUDENT_A}/lab/tree/{AID}/{AID}.ipynb")
    student_a.locator(".jp-NotebookPanel .jp-Cell").first.wait_for()
    # the first solution cell, as the student sees it: rendered once the notebook has scrolled to it
    solution = student_a.locator(".jp-NotebookPanel .jp-Cell", has_text="def scaled_dot_product_attention").first
    solution.scroll_into_view_if_needed()
    expect(solution).to_contain_text(sdpa_return, timeout=30_000)   # the stub raises, returns nothing
    assert "# YOUR CODE HERE" not in solution.inner_text(), solution.inner_text()
    assert student_a.locator(".jp-NotebookPanel-toolbar .validate-button").count() == 1, "no Validate button"
    shot(student_a, "05_student_a_solution_open")
    open_assignments(student_a)
    dialog = validate_from_list(student_a)
    assert "Success! Your notebook passes all the tests." in dialog.inner_text(), dialog.inner_text()
    shot(student_a, "06_student_a_validate_success")
    dialog.locator(".jp-mod-accept").first.click()
    submit(student_a)
    shot(student_a, "07_student_a_submitted")

    step_done(3)

    # 4. student B: a bug the visible tests miss
    login_done(student_b, STUDENT_B)
    ta = start_login(browser, hub, TA)                 # the TA's server starts while B works
    open_assignments(student_b)
    fetch(student_b)
    buggy, mutant = buggy_submission(COURSE, AID, BUG)
    assert mutant.fails == (BUG_CELL,), mutant.fails
    put_notebook(hub, STUDENT_B, buggy)
    dialog = validate_from_list(student_b)
    assert "Success! Your notebook passes all the tests." in dialog.inner_text(), \
        f"{BUG} should pass the visible tests (only the hidden ones catch it): {dialog.inner_text()}"
    shot(student_b, "08_student_b_validate_visible_tests_pass")
    dialog.locator(".jp-mod-accept").first.click()
    submit(student_b)
    shot(student_b, "09_student_b_submitted")

    step_done(4)

    # 5. the instructor collects in the course's Formgrader
    formgrader(instructor, hub)
    modal, text = formgrader_action(instructor, "collect")
    assert f"Successfully collected submissions of '{AID}'" in text, text
    assert all(f"Collecting submission: {student} {AID}" in text for student in (STUDENT_A, STUDENT_B)), text
    shot(instructor, "10_instructor_collected")
    close_modal(instructor, modal)

    step_done(5)
    walk.pages = {"instructor": instructor, "student_a": student_a, "student_b": student_b, "ta": ta}
    walk.collected = True


def test_course_loop_on_jupyterhub_isolation_grading_feedback(hub, walk):
    if not walk.collected:
        pytest.skip("the walk-through's first half (release, submit, collect) did not finish: see its failure")
    from playwright.sync_api import expect

    tests, total = auto_points()
    auto_max = sum(tests.values())
    course = deploy.course_folder(COURSE_ID)
    step_done = walk.step_done
    instructor, student_a, student_b, ta = (walk.pages[name] for name in ("instructor", "student_a", "student_b", "ta"))

    # 6. student B cannot reach anyone else's work, from B's own terminal on the hub: each target
    #    exists (its owner sees it) and B's shell is refused with "Permission denied"
    targets = {f"{hub.exchange}/{COURSE_ID}/inbound": GRADER,                           # listing submissions
               f"{hub.exchange}/{OTHER_COURSE}": deploy.grader_account(OTHER_COURSE),   # the other course
               f"{deploy.home(STUDENT_A)}/{AID}/{AID}.ipynb": STUDENT_A,                # A's work
               f"{course}/course/submitted/{STUDENT_A}/{AID}/{AID}.ipynb": GRADER,      # A's collected submission
               f"{course}/solutions/{AID}/{AID}.ipynb": GRADER,                         # the course's source
               f"{course}/mutants/{AID}.py": GRADER,
               f"{deploy.home(TA)}": TA,                                                # a grader's home
               f"{deploy.home(OTHER_STUDENT)}": OTHER_STUDENT}                          # the other course's student
    for owner in dict.fromkeys(targets.values()):
        theirs = [target for target, of in targets.items() if of == owner]
        missing = hub.as_user(owner, ["sh", "-c", 'for f; do test -e "$f" || echo "$f"; done', "sh", *theirs])
        assert missing.returncode == 0 and not missing.stdout.strip(), f"as {owner}, missing: {missing.stdout}"
    terminal = open_terminal(student_b, f"{hub.url}/user/{STUDENT_B}")
    expect(terminal.locator(".xterm-accessibility-tree")).to_contain_text(f"{STUDENT_B}@", timeout=30_000)  # prompt
    terminal.locator(".xterm-helper-textarea").focus()
    script = ("id -un; for f in " + " ".join(targets) + "; do if [ -d $f ]; then e=$(ls $f 2>&1 >/dev/null); "
              "else e=$(cat $f 2>&1 >/dev/null); fi; case $e in *'Permission denied'*) echo DENIED $f;; "
              "'') echo READABLE $f;; *) echo OTHER $f;; esac; done; echo CHECKS-DONE")
    paste(terminal, script)
    student_b.keyboard.press("Enter")
    wait_until(lambda: "CHECKS-DONE" in terminal_lines(terminal), 30, f"{STUDENT_B}'s checks to finish in the terminal")
    lines = terminal_lines(terminal)
    assert STUDENT_B in lines, f"the terminal does not run as {STUDENT_B}: {lines[:6]}"
    for target in targets:
        assert f"DENIED {target}" in lines, f"{STUDENT_B}'s shell was not refused {target}: {lines}"
    assert not any(line.startswith(("READABLE", "OTHER")) for line in lines), lines
    shot(student_b, "11_student_b_terminal_permission_denied")
    student_b.goto(f"{hub.url}/user/{STUDENT_A}/lab")
    student_b.get_by_text("403").first.wait_for()
    refused = f"You do not have permission to access Server at /user/{STUDENT_A}/"
    assert refused in student_b.locator("body").inner_text()
    shot(student_b, "12_student_b_cannot_open_student_a_server")
    answer = student_b.goto(f"{hub.url}/services/{COURSE_ID}/formgrader")
    assert answer.status == 403, f"the course's Formgrader answered student B with {answer.status}"
    assert "Formgrader" not in student_b.locator("body").inner_text()

    step_done(6)

    # 7. the TA grades in the course's service: a terminal there runs as the grader account, in the
    #    course folder; sandboxed as that account when bubblewrap can make its namespaces for an
    #    unprivileged user here, else (e.g. a container where only root may) as root, as CI may
    probe = hub.as_user(GRADER, ["python", "-c", "from grader.sandbox import check_available; check_available()"],
                        cwd=course)
    login_done(ta, TA)
    items = nbgrader_menu(ta)
    assert "Course List" in items and "Assignment List" not in items, items
    ta.keyboard.press("Escape")
    autograde = f"python -m grader autograde {AID} {course}/course/submitted --course-dir {course}/course"
    feedback = f"python -m grader feedback {AID} --course-dir {course}/course"
    logs = {step: course / "course" / f"{step}-hubtest.log" for step in ("autograde", "feedback")}
    grading_started = time.monotonic()
    terminal = open_terminal(ta, f"{hub.url}/services/{COURSE_ID}")
    expect(terminal.locator(".xterm-accessibility-tree")).to_contain_text(f"{GRADER}@", timeout=30_000)
    terminal.locator(".xterm-helper-textarea").focus()
    if probe.returncode == 0:
        paste(terminal, f"cd {course} && id -un && {autograde} > {logs['autograde']} 2>&1; echo AUTOGRADE-EXIT-$?; "
                        f"{feedback} > {logs['feedback']} 2>&1; echo FEEDBACK-EXIT-$?")
        ta.keyboard.press("Enter")
        wait_until(lambda: any(re.fullmatch(r"FEEDBACK-EXIT-\d+", line) for line in terminal_lines(terminal)), 600,
                   "the TA's grading in the service's terminal")
        lines = terminal_lines(terminal)
        assert GRADER in lines, f"the service's terminal does not run as {GRADER}: {lines[:6]}"
        shot(ta, "13_ta_graded_in_the_course_service")
        graded_text, feedback_text = logs["autograde"].read_text(), logs["feedback"].read_text()
        assert "AUTOGRADE-EXIT-0" in lines, f"autograde failed in the TA's terminal:\n{graded_text}"
        assert "FEEDBACK-EXIT-0" in lines, f"feedback failed in the TA's terminal:\n{feedback_text}"
    else:
        print(f"NOTE: the sandbox cannot start for {GRADER} here "
              f"({(probe.stderr.strip().splitlines() or ['?'])[-1]}): grading as root")
        graded = hub.as_user("root", autograde.split(), cwd=course)
        made = hub.as_user("root", feedback.split(), cwd=course)
        graded_text, feedback_text = graded.stdout + graded.stderr, made.stdout + made.stderr
        assert graded.returncode == 0 and made.returncode == 0, f"{graded_text}\n{feedback_text}"
        owned = hub.as_user("root", ["chown", "-R", f"{GRADER}:{GRADER}", course / "course"])
        assert owned.returncode == 0, owned.stderr
    grading_s = time.monotonic() - grading_started
    table = {line.split()[0]: line for line in graded_text.splitlines()
             if line.split()[:1] in ([STUDENT_A], [STUDENT_B])}
    assert f"{auto_max:g}/{auto_max:g}" in table.get(STUDENT_A, ""), graded_text
    row_b = table.get(STUDENT_B, "")
    assert f"{auto_max - tests[BUG_CELL]:g}/{auto_max:g}" in row_b and BUG_CELL in row_b, graded_text
    assert "without the sandbox" not in graded_text.lower(), graded_text
    assert "2 feedback pages" in feedback_text, feedback_text
    # nbgrader's release_feedback names the returned feedback after the submission's keys: the grader
    # keeps them beside each student's feedback, as nbgrader's own autograde and feedback do
    for student in (STUDENT_A, STUDENT_B):
        keys = course / "course" / "feedback" / student / AID
        assert (keys / "timestamp.txt").is_file() and (keys / "submission_secret.txt").is_file(), \
            f"no nbgrader submission keys in {keys}"

    scores = [(STUDENT_A, auto_max), (STUDENT_B, auto_max - tests[BUG_CELL])]
    formgrader(ta, hub, path=f"/manage_submissions/{AID}")
    for student, score in scores:
        row = ta.locator("tr", has_text=student)
        row.wait_for()
        assert f"{score:g} / {total:g}" in row.inner_text(), row.inner_text()
    shot(ta, "14_ta_sees_the_scores")
    formgrader(ta, hub)
    modal, text = formgrader_action(ta, "release-feedback")
    assert f"Successfully released feedback of '{AID}'" in text, text
    assert all(f"Releasing feedback for student '{student}'" in text for student in (STUDENT_A, STUDENT_B))
    shot(ta, "15_ta_released_feedback")
    close_modal(ta, modal)
    # the instructor's view of the same course: the TA's grades, in the one gradebook
    formgrader(instructor, hub, path=f"/manage_submissions/{AID}")
    for student, score in scores:
        row = instructor.locator("tr", has_text=student)
        row.wait_for()
        assert f"{score:g} / {total:g}" in row.inner_text(), row.inner_text()
    shot(instructor, "16_instructor_sees_the_same_gradebook")

    step_done(7)

    # 8. the students read their feedback
    url = open_feedback(student_a, hub, STUDENT_A)
    shot(student_a, "17_student_a_feedback_fetched")
    student_a.goto(url)
    text = student_a.locator("body").inner_text()
    cells = grade_cells(text)
    assert set(cells) == set(tests), f"feedback lists {sorted(cells)}, the release {sorted(tests)}"
    assert all(score == top for score, top in cells.values()), f"not full marks: {cells}"
    assert sum(score for score, _ in cells.values()) == auto_max
    assert not [s for s in HIDDEN_SOURCE if s in text], "hidden test source in student A's feedback"
    shot(student_a, "18_student_a_feedback_full_marks")

    url = open_feedback(student_b, hub, STUDENT_B)
    student_b.goto(url)
    text = student_b.locator("body").inner_text()
    cells = grade_cells(text)
    assert cells[BUG_CELL] == (0.0, tests[BUG_CELL]), cells
    assert all(score == top for cell, (score, top) in cells.items() if cell != BUG_CELL), cells
    assert BUG_MESSAGE in text and BUG_HINT in text, "the failing hidden check's message is not in B's feedback"
    leaked = [s for s in HIDDEN_SOURCE if s in text]
    assert not leaked, f"student B's feedback shows hidden test source: {leaked}"
    student_b.get_by_text(BUG_HINT).first.scroll_into_view_if_needed()
    shot(student_b, "19_student_b_feedback_hidden_test_message")

    step_done(8)
    print(f"hub walk-through: {time.monotonic() - walk.started:.0f} s (hub start-up {hub.startup_s:.1f} s; grading 2 "
          f"submissions in the TA's terminal {grading_s:.1f} s); by step: {', '.join(walk.laps)}")
