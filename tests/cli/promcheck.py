"""Checks Prometheus's text exposition format (version 0.0.4) on stdin: every
metric has one HELP and one TYPE line before its samples, names and label names
are well formed, label values escaped, values numbers, no series twice. Prints
each problem and exits 1; prints the number of samples and exits 0 when none."""
import re
import sys

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"')
SAMPLE = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$")

problems, helped, typed, seen, samples = [], set(), {}, set(), 0
for n, line in enumerate(sys.stdin.read().split("\n")[:-1], 1):
    if line.startswith("# HELP "):
        name = line.split(" ")[2]
        if not NAME.match(name) or name in helped:
            problems.append(f"line {n}: HELP of '{name}' malformed or twice")
        helped.add(name)
    elif line.startswith("# TYPE "):
        parts = line.split(" ")
        if len(parts) != 4 or parts[3] not in ("gauge", "counter", "untyped", "summary", "histogram"):
            problems.append(f"line {n}: TYPE malformed: {line}")
        elif parts[2] in typed:
            problems.append(f"line {n}: TYPE of '{parts[2]}' twice")
        typed[parts[2]] = parts[3]
    else:
        m = SAMPLE.match(line)
        if not m:
            problems.append(f"line {n}: not a sample: {line!r}")
            continue
        name, _, labels, value = m.groups()
        if name not in typed or name not in helped:
            problems.append(f"line {n}: '{name}' has no HELP or TYPE before it")
        rest = labels or ""
        names = []
        while rest:
            lm = LABEL.match(rest)
            if not lm:
                problems.append(f"line {n}: labels malformed at {rest!r}")
                break
            names.append(lm.group(1))
            rest = rest[lm.end():]
            if rest.startswith(","):
                rest = rest[1:]
            elif rest:
                problems.append(f"line {n}: labels malformed at {rest!r}")
                break
        if len(set(names)) != len(names):
            problems.append(f"line {n}: a label twice")
        try:
            float(value)
        except ValueError:
            problems.append(f"line {n}: value {value!r} is not a number")
        series = (name, labels)
        if series in seen:
            problems.append(f"line {n}: series twice: {line}")
        seen.add(series)
        samples += 1
for p in problems:
    print(p)
print(f"{samples} samples" if not problems else f"{len(problems)} problems")
sys.exit(1 if problems else 0)
