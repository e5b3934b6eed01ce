#!/usr/bin/env python3
# Run inside a sandbox: tries to open every file under /proc and /sys for writing (never writes a
# byte) and prints JSON with the ones that opened. Case 31: with Kiln run as root the sandbox's uid
# 0 is the host's, so any /proc or /sys entry that opens for writing is a way to steer the host.
import json
import os
import sys

# Magic links to the process's own open files (its stdout pipe opens for writing, by design).
SKIP_DIRS = {"fd", "fdinfo", "map_files"}

roots = sys.argv[1:] or ["/proc", "/sys"]
checked = 0
writable = []
absent = []
for root in roots:
    if not os.path.isdir(root):
        absent.append(root)
        continue
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False, onerror=lambda e: None):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS]
        for name in filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                continue
            checked += 1
            try:
                fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY)
            except OSError:
                continue
            os.close(fd)
            writable.append(p)
# Bounded, so the report fits in an exec's stdout tail however much is open.
print(json.dumps({"checked": checked, "writable_count": len(writable), "writable": writable[:60], "absent": absent}))
