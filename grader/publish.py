"""`publish DEST`: the student-facing course, without the answer key (issue 12, item 5)."""


def publish(dest, force=False):
    raise SystemExit("publish: not implemented yet")
