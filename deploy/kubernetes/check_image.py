"""Checks for the single-user image's install steps (image_steps.sh), with the standard library only:

  --file F            F exists under --root (every file the steps name);
  --requirements F    every `name==version` of F is installed in this Python's environment at that
                      version, and agrees with --constraints' pin for it (the dry run: the pins
                      resolve in an existing environment, without docker and without downloads);
  --installed-pins    every pin of --constraints is installed at its version (after the image's pip
                      install: nothing moved torch).

Prints what is wrong, one line each, and exits 1; prints a one-line summary and exits 0 otherwise.
"""
import argparse
import re
import sys
from importlib import metadata
from pathlib import Path

PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")


def canonical(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(path):
    """{canonical name: (name, version)} of a requirements file's `name==version` lines; the other
    lines (comments, blanks) are skipped, anything else is an error."""
    found, errors = {}, []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        match = PIN.match(text)
        if not match:
            errors.append(f"{path}:{number}: {text!r} is not pinned as name==version")
            continue
        found[canonical(match.group(1))] = (match.group(1), match.group(2))
    return found, errors


def installed(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def same_version(have, want):
    """2.13.0+cpu is 2.13.0 (a local build label, as PEP 440's == reads it)."""
    return have is not None and have.split("+", 1)[0] == want.split("+", 1)[0]


def check(root, files=(), requirements=(), constraints=None, installed_pins=False, version_of=installed):
    """The problems found, one line each ([] = all good)."""
    root = Path(root)
    problems = [f"{f}: named by image_steps.sh, missing under {root}" for f in files if not (root / f).is_file()]
    held = {}
    if constraints:
        if (root / constraints).is_file():
            held, errors = pins(root / constraints)
            problems += errors
        else:
            problems.append(f"{constraints}: missing under {root}")
    for file in requirements:
        if not (root / file).is_file():
            problems.append(f"{file}: missing under {root}")
            continue
        wanted, errors = pins(root / file)
        problems += errors
        for key, (name, version) in wanted.items():
            if key in held and not same_version(held[key][1], version):
                problems.append(f"{file}: {name}=={version}, but {constraints} holds it at {held[key][1]}")
            have = version_of(name)
            if have is None:
                problems.append(f"{file}: {name}=={version} is not installed in {sys.prefix}")
            elif not same_version(have, version):
                problems.append(f"{file}: {name}=={version}, but {sys.prefix} has {have}")
    if installed_pins:
        for name, version in held.values():
            have = version_of(name)
            if not same_version(have, version):
                problems.append(f"{constraints}: {name} must stay {version}; the environment has {have or 'none'}")
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", required=True, help="the folder the other paths are relative to")
    parser.add_argument("--file", action="append", default=[])
    parser.add_argument("--requirements", action="append", default=[])
    parser.add_argument("--constraints")
    parser.add_argument("--installed-pins", action="store_true")
    args = parser.parse_args(argv)
    problems = check(args.root, args.file, args.requirements, args.constraints, args.installed_pins)
    for line in problems:
        print(f"image_steps: {line}", file=sys.stderr)
    if problems:
        return 1
    print(f"image_steps: {len(args.file)} files present; the pins of {', '.join(args.requirements) or 'nothing'} "
          f"resolve in {sys.prefix}" + ("; the constraints hold" if args.installed_pins else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
