#!/usr/bin/env python3
"""Counts the locked instructions (x86-64: `lock`-prefixed RMWs, `xchg`,
and `mfence`; LLVM emits a SeqCst fence as `lock or $0, (%rsp)`) that a
callgrind run executed in the program's own executable.

    perf/callgrind_atomics.py EXE OUT [--by-function]

OUT is a callgrind output made with `--dump-instr=yes --compress-pos=no
--compress-strings=no --demangle=no` (perf/callgrind-engine.sh does so).
Each executed address is looked up in `objdump -d EXE`; prints one line per
kind, `<kind> <count>`. Instructions run in shared libraries (libc's
futex and mutex code) are not counted. Callgrind prices every instruction
alike, so a fence or a locked RMW (tens of cycles) weighs as much as an
add in its Ir; this count is what tells them apart.
"""
import collections
import re
import subprocess
import sys


def main():
    exe, out = sys.argv[1], sys.argv[2]
    by_function = "--by-function" in sys.argv[3:]
    dis = {}
    objdump = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", exe], capture_output=True, text=True, check=True
    ).stdout
    for line in objdump.splitlines():
        m = re.match(r"\s+([0-9a-f]+):\s+(.*)", line)
        if m:
            dis[int(m.group(1), 16)] = m.group(2).strip()
    syms = {}
    nm = subprocess.run(["nm", exe], capture_output=True, text=True, check=True).stdout
    for line in nm.splitlines():
        p = line.split()
        if len(p) == 3 and p[1] in "tT":
            syms[p[2]] = int(p[0], 16)
    exe_name = exe.rsplit("/", 1)[-1]
    costs = collections.Counter()
    lowest = {}
    ob = fn = None
    skip = False
    with open(out) as f:
        for line in f:
            if line.startswith("ob="):
                ob = line[3:].strip()
            elif line.startswith("fn="):
                fn = line[3:].strip()
            elif line.startswith("calls="):
                skip = True  # the next cost line is the call's inclusive cost
            elif line.startswith("0x"):
                if skip:
                    skip = False
                    continue
                if ob and ob.endswith(exe_name):
                    p = line.split()
                    a = int(p[0], 16)
                    costs[(fn, a)] += int(p[-1])
                    lowest[fn] = min(lowest.get(fn, a), a)
    # Load bias: a function's lowest executed address is its entry point.
    bias = collections.Counter(a - syms[f] for f, a in lowest.items() if f in syms)
    b = bias.most_common(1)[0][0]
    kinds = collections.Counter()
    where = collections.Counter()
    for (f, a), c in costs.items():
        ins = dis.get(a - b, "")
        op = ins.split()
        if not op:
            continue
        if op[0] == "lock":
            kind = "lock " + op[1]
        elif op[0].startswith("xchg") and "(" in ins:
            # Only with a memory operand: `xchg` between registers is not
            # locked (`xchg %ax,%ax` is a two-byte nop, used as padding).
            kind = op[0]
        elif op[0] == "mfence":
            kind = op[0]
        else:
            continue
        kinds[kind] += c
        where[(kind, f)] += c
    for k, c in sorted(kinds.items()):
        print(k, c)
    if by_function:
        for (k, f), c in where.most_common(30):
            print(f"  {c:>10} {k:<14} {f[:120]}")


main()
