"""Compare two output directories of scripts/compare-outputs.sh, masking what differs from run to
run (times, durations, the output directory's own path, ports); rows are compared as sorted
lines (the scorer pool finishes events out of order). Exit 1 when anything differs."""
import os, re, sys, difflib
a, b = sys.argv[1], sys.argv[2]
TS = re.compile(r'\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d| UTC)?')
def norm(path):
    text = open(path, encoding='utf-8', errors='replace').read()
    text = TS.sub('<TS>', text)
    for d in (a, b):
        full = os.path.realpath(d)
        text = text.replace(full, '<OUT>').replace(full.replace('/', '&#x2f;'), '<OUT>')
    text = re.sub(r'127\.0\.0\.1:\d+', '127.0.0.1:<P>', text)
    text = re.sub(r'"latency_us":\d+', '"latency_us":0', text)
    text = re.sub(r'(?m)^\s*elapsed .*$', '  elapsed <E>', text)
    text = re.sub(r'\d+(\.\d+)? (ms|µs|s)\b', '<DUR>', text) if path.endswith(('.log', '.err')) else text
    lines = text.splitlines()
    if path.endswith('.jsonl'):
        lines.sort()
    return lines
bad = 0; n = 0
for root, _, files in os.walk(a):
    for f in sorted(files):
        pa = os.path.join(root, f); pb = os.path.join(b, os.path.relpath(pa, a))
        n += 1
        if not os.path.exists(pb):
            print('missing', pb); bad += 1; continue
        la, lb = norm(pa), norm(pb)
        if la != lb:
            bad += 1
            print('DIFF', os.path.relpath(pa, a))
            for l in list(difflib.unified_diff(la, lb, lineterm=''))[:12]:
                print('   ', l[:300])
print(f'{n} files compared, {bad} differ')
sys.exit(1 if bad else 0)
