#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that each instruction-set level's kernels use no instruction of a higher level.

Usage: check_objects.py OBJDUMP DIR

DIR holds kiln_kernels_<level>.o (cmake/kiln-isa-objects.cmake). Every instruction of the
x86_64 object must be encodable without a VEX or EVEX prefix (SSE at most), and no instruction of
the x86_64_v3 object may carry an EVEX prefix (AVX-512). The whole of each object is read, not only
the code a test happens to run. Fails when an object is missing or objdump fails.
"""
import pathlib
import subprocess
import sys

# Legacy prefixes that may come before a VEX or EVEX prefix in 64-bit mode (segment overrides and
# the address-size prefix); 66, F2, F3 and REX may not, they are folded into VEX and EVEX.
SKIPPABLE = {"26", "2e", "36", "3e", "64", "65", "67"}


def encodings(objdump: str, path: pathlib.Path):
    """(address, encoding, text) for every instruction: encoding 'evex', 'vex' or 'legacy'."""
    out = subprocess.run([objdump, "-d", "-w", str(path)], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or not parts[0].strip().endswith(":"):
            continue
        raw = parts[1].split()
        if not raw:
            continue
        i = 0
        while i < len(raw) and raw[i] in SKIPPABLE:
            i += 1
        first = raw[i] if i < len(raw) else ""
        kind = "evex" if first == "62" else "vex" if first in ("c4", "c5") else "legacy"
        yield parts[0].strip().rstrip(":"), kind, parts[2].strip()


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    objdump, directory = sys.argv[1], pathlib.Path(sys.argv[2])
    forbidden = {"x86_64": {"vex", "evex"}, "x86_64_v3": {"evex"}}
    failed = False
    for level, bad in forbidden.items():
        path = directory / f"kiln_kernels_{level}.o"
        if not path.exists():
            print(f"{path}: missing (is {level} among KILN_DISPATCH_LEVELS?)", file=sys.stderr)
            failed = True
            continue
        count, offending = 0, []
        for address, kind, text in encodings(objdump, path):
            count += 1
            if kind in bad:
                offending.append(f"  {address}: {text} ({kind.upper()})")
        if count < 1000:
            print(f"{path}: only {count} instructions disassembled; is objdump working?", file=sys.stderr)
            failed = True
        elif offending:
            print(f"{path}: {len(offending)} of {count} instructions are above {level}:", file=sys.stderr)
            print("\n".join(offending[:20]), file=sys.stderr)
            failed = True
        else:
            print(f"{path}: {count} instructions, none above {level}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
