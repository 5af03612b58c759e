#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Fails on a broken relative link in kiln's Markdown: a file that does not exist, or an anchor
that names no heading of its page. Code blocks and inline code are skipped.

    python3 tests/docs/check_links.py REPOSITORY_ROOT
"""
import re
import sys
from pathlib import Path


def anchors(page):
    """GitHub's anchors for the headings of `page`."""
    out = set()
    in_code = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        elif not in_code and line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            out.add(re.sub(r"[^a-z0-9 _-]", "", text).replace(" ", "-"))
    return out


def links(page):
    """(line number, target) of each Markdown link outside code."""
    in_code = False
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            continue
        for m in re.finditer(r"\[[^\]]*\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", "", line)):
            yield n, m.group(1)


def main(root):
    pages = sorted(root.glob("*.md")) + sorted((root / "docs").rglob("*.md"))
    broken = []
    for page in pages:
        for n, target in links(page):
            if re.match(r"^[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(root)}:{n}: '{target}'"
            if not dest.exists():
                broken.append(f"{where}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{where}: no heading '#{anchor}' in {dest.name}")
    for b in broken:
        print(b)
    print(f"{len(pages)} pages checked, {len(broken)} broken links")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()))
