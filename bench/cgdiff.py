#!/usr/bin/env python3
"""Per-cycle instruction costs by function, from the two callgrind runs that
bench/profile.sh keeps (KEEP=DIR): (3N run - N run) / 2N, self and inclusive.

    bench/cgdiff.py DIR WORKLOAD N [TOP] [FILTER]
"""
import re
import subprocess
import sys


def costs(path, inclusive):
    out = subprocess.run(
        ["callgrind_annotate", "--auto=no", "--threshold=100", f"--inclusive={'yes' if inclusive else 'no'}", path],
        capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+(.*)$", line)
        if not m:
            continue
        name = m.group(2)
        # Drop the file part and the object suffix: `file:function [obj]`.
        name = re.sub(r" \[[^\]]*\]$", "", name)
        name = name.split(":", 1)[1] if re.match(r"^[^:]*\.(rs|c|S):", name) else name
        table[name] = table.get(name, 0) + int(m.group(1).replace(",", ""))
    return table


def main():
    d, w, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 40
    flt = sys.argv[5] if len(sys.argv) > 5 else ""
    for inclusive in (False, True):
        a = costs(f"{d}/callgrind.{w}.1.out", inclusive)
        b = costs(f"{d}/callgrind.{w}.3.out", inclusive)
        diff = {k: (b.get(k, 0) - a.get(k, 0)) / (2 * n) for k in set(a) | set(b)}
        rows = sorted(((v, k) for k, v in diff.items() if flt in k), reverse=True)[:top]
        print(f"== {w}: {'inclusive' if inclusive else 'self'} instructions per cycle")
        for v, k in rows:
            print(f"{v:9.0f}  {k[:200]}")


main()
