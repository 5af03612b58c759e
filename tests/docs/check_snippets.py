#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails when a code block of kiln's Markdown no longer is the file it shows. A block preceded by

    <!-- snippet: examples/readme.cpp -->

must equal that file after its opening comment lines (the license line and a note on what the
file is): the file is built and run by the tests, so the block compiles and works as shown, as
Boost.Hana's and xsimd's documentation is cut from compiled examples. A marker may name a region
of the file instead, for a page that shows part of a program:

    <!-- snippet: examples/docs/kernels_tour.cpp#tour -->

is the lines between the file's two lines `// [tour]` (`# [tour]` in Python), without their
common indentation. A marker naming a file or region that does not exist, or not followed by a
code block, fails too.

    python3 tests/docs/check_snippets.py REPOSITORY_ROOT
"""
import sys
from pathlib import Path

MARKER = "<!-- snippet: "


def body(path):
    """The file's text after its leading comment lines."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].lstrip().startswith(("//", "#")) and not lines[i].startswith("#include"):
        i += 1
    return "".join(lines[i:])


def region(path, name):
    """The lines between the file's two `// [name]` (or `# [name]`) lines, dedented; None when
    the file does not have exactly two."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    marks = [i for i, line in enumerate(lines) if line.strip() in ("// [%s]" % name, "# [%s]" % name)]
    if len(marks) != 2:
        return None
    inner = lines[marks[0] + 1:marks[1]]
    indent = min((len(l) - len(l.lstrip(" ")) for l in inner if l.strip()), default=0)
    return "".join(l[indent:] if l.strip() else l.lstrip(" ") for l in inner)


def check(root):
    problems, count = [], 0
    pages = [root / "README.md", root / "CONTRIBUTING.md"] + sorted((root / "docs").glob("*.md"))
    for page in pages:
        if not page.exists():
            continue
        lines = page.read_text(encoding="utf-8").splitlines(keepends=True)
        for n, line in enumerate(lines):
            if not line.startswith(MARKER):
                continue
            where = "%s:%d" % (page.relative_to(root), n + 1)
            name = line[len(MARKER):].split("-->")[0].strip()
            name, _, part = name.partition("#")
            source = root / name
            if not source.is_file():
                problems.append("%s: the snippet's file %s does not exist" % (where, name))
                continue
            if n + 1 >= len(lines) or not lines[n + 1].startswith("```"):
                problems.append("%s: a snippet marker must be followed by a code block" % where)
                continue
            end = n + 2
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            block = "".join(lines[n + 2:end])
            count += 1
            want = region(source, part) if part else body(source)
            if want is None:
                problems.append("%s: %s has no region '%s' (two lines '// [%s]')" % (where, name, part, part))
                continue
            if block != want:
                problems.append("%s: the code block differs from %s (copy the file's code into the page, or the page's into the file)"
                                % (where, name))
    return problems, count


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
    problems, count = check(root)
    for p in problems:
        print(p)
    if problems:
        return 1
    print("check_snippets: %d code blocks are the files they show" % count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
