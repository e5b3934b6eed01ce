#!/usr/bin/env python3
# Hand-run checks of kiln-sandbox against the attacks in shared/SANDBOX_CASES.md that the helper
# alone answers for; prints PASS/FAIL per check and the start/exec timings. Run as root and as an
# unprivileged user (the workspace must belong to the user running it).
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_helper import Helper, SetupFailed  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"
results = []


def check(name, ok, detail=""):
    results.append((name, bool(ok)))
    print("%s  %s%s" % ("PASS" if ok else "FAIL", name, ("  -- " + detail) if (detail and not ok) else ""))
    sys.stdout.flush()


def summary():
    failed = [n for n, ok in results if not ok]
    print("%d checks, %d failed" % (len(results), len(failed)))
    return 1 if failed else 0


def sandbox_unavailable(why):
    # The one place this suite decides what a helper that cannot build a sandbox means. These are
    # kiln-sandbox's own checks, so it is a failure with the helper's reason, never a skip,
    # whether or not KILN_REQUIRE_SANDBOX=1 (which turns the node suites' skips into failures).
    check("kiln-sandbox builds a sandbox here", False, why)
    return summary()


def pgrep(pattern):
    r = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    return [int(p) for p in r.stdout.split()]


def wait_gone(pattern, seconds=3.0):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if not pgrep(pattern):
            return True
        time.sleep(0.05)
    return False


def dead(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


def main():
    # The workspace and a temporary home are removed however the checks end.
    made = []
    try:
        return checks(made)
    finally:
        for d in made:
            shutil.rmtree(d, ignore_errors=True)


def checks(made):
    ws = tempfile.mkdtemp(prefix="kiln-helper-check-")
    made.append(ws)
    home = os.path.expanduser("~")
    if not os.access(home, os.W_OK):
        # A system user made without a home (useradd by another suite): plant the bait in a temp one.
        home = tempfile.mkdtemp(prefix="kiln-helper-home-")
        made.append(home)
        os.environ["HOME"] = home
    # A host secret and a link to it planted in the workspace (cases 1 and 3).
    secret_dir = os.path.join(home, ".ssh")
    os.makedirs(secret_dir, exist_ok=True)
    secret = os.path.join(secret_dir, "kiln_probe_secret")
    with open(secret, "w") as f:
        f.write("TOPSECRET\n")
    os.symlink(secret, os.path.join(ws, "planted_link"))
    probe = os.path.join(ws, "probe")
    subprocess.run(["cc", "-O1", "-o", probe, os.path.join(HERE, "syscall_probe.c")], check=True)
    os.environ["KILN_HOST_SECRET_PROBE"] = "leaky"

    h = Helper(ws)
    try:
        status = h.start()
    except SetupFailed as e:
        return sandbox_unavailable("%s; status lines: %s" % (e, json.dumps(e.lines)))
    except OSError as e:
        return sandbox_unavailable("%s could not be started or fed its spec: %s" % (h.binary, e))
    check("status lines name every step in order",
          [s["step"] for s in status] == ["spec", "pdeathsig", "cgroup", "userns", "namespaces", "fork_init", "mounts",
                                          "pivot_root", "network", "hostname", "landlock", "seccomp", "ready"],
          json.dumps(status))

    r = h.run(["/bin/true"])
    check("/bin/true exits 0", r["exit_code"] == 0, json.dumps(r))
    r = h.run(["id", "-u"])
    check("id -u is the caller's uid", r["stdout"].strip() == str(os.getuid()), r["stdout"] + r["stderr"])
    r = h.sh("grep -E 'NoNewPrivs|Cap|Seccomp:' /proc/self/status")
    lines = dict(l.split(":\t") for l in r["stdout"].strip().splitlines())
    check("NoNewPrivs 1, every Cap* 0, seccomp filter on",
          lines.get("NoNewPrivs") == "1" and lines.get("Seccomp") == "2" and
          all(int(v, 16) == 0 for k, v in lines.items() if k.startswith("Cap")), r["stdout"])
    r = h.sh("ls /root; ls %s; ls /home; cat %s; cat planted_link; cat /etc/shadow" % (home, secret))
    check("host home, /root, secrets and planted links unreadable",
          "TOPSECRET" not in r["stdout"] and r["stdout"].strip() in ("", ws.split("/")[1]), r["stdout"] + r["stderr"])
    r = h.sh("ln -s %s mylink; cat mylink; ln /etc/passwd hard 2>&1; echo rc=$?" % secret)
    check("symlink made inside and hard link to outside fail", "TOPSECRET" not in r["stdout"] and
          not os.path.exists(os.path.join(ws, "hard")), r["stdout"] + r["stderr"])
    r = h.sh("echo x > /usr/kiln_probe; echo x > /kiln_probe; echo x > /etc/kiln_probe; "
             "echo x > /tmp/kiln_outside_probe && echo tmp-ok; echo x > inside_probe && echo ws-ok")
    check("writes outside the workspace fail; /tmp is private",
          "tmp-ok" in r["stdout"] and not os.path.exists("/tmp/kiln_outside_probe") and
          not os.path.exists("/usr/kiln_probe") and not os.path.exists("/kiln_probe"), r["stdout"] + r["stderr"])
    check("workspace writes land on the host", os.path.exists(os.path.join(ws, "inside_probe")))
    # /etc's binds share one Landlock rule on /etc (landlock.cpp): each still reads, nested binds
    # included, and nothing under /etc takes a write.
    r = h.sh("head -c 5 /etc/passwd; echo; ls /etc/ssl/certs | head -1 | wc -l; "
             "echo x >> /etc/passwd 2>/dev/null && echo passwd-written; echo x > /etc/ssl/certs/kiln_probe 2>/dev/null "
             "&& echo certs-written; ls /etc/kiln_probe 2>/dev/null")
    check("/etc binds readable under Landlock, none writable",
          r["stdout"].split() == ["root:", "1"] and not os.path.exists("/etc/kiln_probe"), r["stdout"] + r["stderr"])
    r = h.sh("ls /proc | grep -E '^[0-9]+$' | sort -n | tr '\\n' ' '; echo; ps -eo pid,comm")
    pids = [int(p) for p in r["stdout"].split("\n")[0].split()]
    # pid 1, this exec's shepherd, the spare shepherd, sh and the 4 pipeline commands: 8 at most.
    check("/proc shows only sandbox processes", len(pids) <= 8 and os.getpid() not in pids,
          r["stdout"])
    r = h.sh("for f in /proc/1/fd/* /proc/2/fd/*; do cat $f < /dev/null; readlink $f; done; cat /proc/1/environ; ls /proc/1/root/; cat /proc/1/maps | head -1; "
             "cat /proc/2/environ")
    check("pid 1 and the shepherd: fd targets, environ, root, maps closed",
          r["stdout"].strip() == "", r["stdout"] + r["stderr"])
    r = h.run(["/usr/bin/env"], env={"PATH": "/usr/bin:/bin", "ONLY": "1"})
    check("host environment not visible", "KILN_HOST_SECRET_PROBE" not in r["stdout"] and "ONLY=1" in r["stdout"],
          r["stdout"])
    r = h.run(["./probe"])
    rows = {l.split()[0]: (int(l.split()[1]), int(l.split()[2])) for l in r["stdout"].splitlines()}
    bad = [k for k, (rc, err) in rows.items()
           if not (k.endswith("_ok") and rc >= 0) and not (k == "clone3" and err == 38)
           and not (not k.endswith("_ok") and k != "clone3" and rc == -1 and err == 1)]
    check("seccomp: ptrace/unshare/mount/io_uring/bpf/keyctl/userfaultfd/perf/TIOCSTI... EPERM, clone3 ENOSYS",
          not bad and len(rows) > 30, "unexpected: %s" % bad)
    r = h.run(["./probe", "x32"])
    check("x32 syscall ABI kills the process", r["signal"] == signal.SIGSYS, json.dumps(r["report"]))
    r = h.run(["./probe", "int80"])
    check("int 0x80 (i386 ABI) does not run", "int80_getpid" not in r["stdout"] and r["signal"] in (
        signal.SIGSYS, signal.SIGSEGV), json.dumps(r["report"]))
    r = h.run(["./probe", "ptrace_parent"])
    check("ptrace of pid 1 refused", "ptrace_attach_pid1 -1 1" in r["stdout"], r["stdout"])

    # Network none: a host listener on loopback must be unreachable.
    lst = socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    port = lst.getsockname()[1]
    r = h.run([PY, "-c", "import socket; socket.create_connection(('127.0.0.1', %d), timeout=2); print('CONNECTED')"
               % port])
    check("network none: host loopback listener unreachable", "CONNECTED" not in r["stdout"], r["stdout"] + r["stderr"])
    r = h.run([PY, "-c", "import socket; socket.create_connection(('1.1.1.1', 53), timeout=2); print('CONNECTED')"])
    check("network none: no egress", "CONNECTED" not in r["stdout"], r["stdout"] + r["stderr"])

    # Host processes: kill -1 inside must not reach them.
    host_sleep = subprocess.Popen(["sleep", "4343"])
    r = h.sh("kill -9 -1; echo survived")
    time.sleep(0.1)
    check("kill -1 does not reach host processes", host_sleep.poll() is None)
    host_sleep.kill()
    r = h.run(["/bin/true"])
    check("helper still serves after kill -1 inside", r["exit_code"] == 0, json.dumps(r))

    # Background processes survive between execs.
    r = h.sh("sleep 300 >/dev/null 2>&1 & echo $! > /tmp/bg.pid")
    r = h.sh("kill -0 $(cat /tmp/bg.pid) && echo alive")
    check("background process keeps running between execs", "alive" in r["stdout"], r["stdout"] + r["stderr"])

    # Kill op: whole tree incl. setsid and double fork.
    id_, out, err, first = h.spawn(["/bin/sh", "-c", "setsid sh -c 'sleep 4545 & sleep 4546' & setsid -f sleep 4547; "
                                    "sleep 4548"])
    time.sleep(0.3)
    alive_before = len(pgrep("^sleep 454"))
    h.kill(id_)
    ex = h.wait_for(id_, ("exited",), 10)
    check("kill op kills the tree (setsid, double fork)", alive_before == 4 and wait_gone("^sleep 454"),
          "before=%d after=%s" % (alive_before, pgrep("^sleep 454")))
    id2, out, err, first = h.spawn(["/bin/sh", "-c", "setsid -f sleep 4647; exit 0"])
    h.wait_for(id2, ("exited",), 10)
    time.sleep(0.1)
    h.kill(id2)
    check("kill op after the command exited still finds its leftovers", wait_gone("^sleep 4647"), str(pgrep("^sleep 4647")))

    r = h.run(["/no/such/binary"])
    check("exec of a missing binary is an error with errno", r.get("error", {}).get("errno") == 2, json.dumps(r))
    r = h.run(["cat"], stdin=b"hello stdin")
    check("stdin is passed", r["stdout"] == "hello stdin", json.dumps(r))
    r = h.run(["sh", "-c", "ulimit -t; ulimit -n"], rlimits={"cpu_s": 7, "nofile": 99})
    check("rlimits applied", r["stdout"].split() == ["7", "99"], r["stdout"])

    # Case 31: /proc holds even without Landlock (the mounts alone): nothing under /proc opens for
    # writing, /proc/sys stays readable, host-wide entries are hidden.
    walker = os.path.join(HERE, "..", "security", "probes", "proc_write_walk.py")
    shutil.copy(walker, os.path.join(ws, "proc_walk.py"))
    for landlock in (True, False):
        hp = Helper(ws, landlock=landlock)
        hp.start()
        r = hp.run([PY, "proc_walk.py", "/proc", "/sys"], timeout=120)
        try:
            rep = json.loads(r["stdout"])
        except ValueError:
            rep = {"checked": 0, "writable_count": -1}
        check("landlock %s: no /proc or /sys entry opens for writing" % ("on" if landlock else "off"),
              rep["checked"] > 300 and rep["writable_count"] == 0, r["stdout"][:800] + r["stderr"][:400])
        r = hp.sh("cat /proc/sys/kernel/pid_max >/dev/null && echo readable; head -c 10 /proc/sched_debug /proc/timer_list 2>/dev/null | wc -c")
        check("landlock %s: /proc/sys readable, sched_debug and timer_list empty" % ("on" if landlock else "off"),
              r["stdout"].split() == ["readable", "0"], r["stdout"] + r["stderr"])
        hp.shutdown()

    spare_checks(ws)

    # Two helpers: private /tmp each.
    h.sh("echo a > /tmp/only_in_a")
    h2 = Helper(ws)
    h2.start()
    r = h2.sh("cat /tmp/only_in_a; ls /tmp")
    check("two helpers cannot see each other's /tmp", "a" not in r["stdout"].split(), r["stdout"])
    r = h2.sh("cat /proc/*/cmdline 2>/dev/null | tr '\\0' ' '")
    check("two helpers cannot see each other's processes", "sleep 300" not in r["stdout"], r["stdout"])
    h2.shutdown()

    # Loopback mode: lo up inside, host listener still unreachable.
    h3 = Helper(ws, network="loopback")
    h3.start()
    r = h3.run([PY, "-c", "import socket\ns=socket.socket(); s.bind(('127.0.0.1',0)); s.listen(1)\n"
                "c=socket.create_connection(s.getsockname(), timeout=2); print('SELF-OK')\n"
                "try:\n  socket.create_connection(('127.0.0.1', %d), timeout=2); print('HOST-CONNECTED')\n"
                "except OSError as e: print('host refused', e)" % port])
    check("network loopback: own listener works, host's unreachable",
          "SELF-OK" in r["stdout"] and "HOST-CONNECTED" not in r["stdout"], r["stdout"] + r["stderr"])
    connect_checks(h, h3, port)
    h3.shutdown()
    lst.close()

    code = h.shutdown()
    check("shutdown exits 0 and leaves no process", code == 0 and wait_gone("^sleep 300"), "code=%s" % code)

    # kill -9 of the parent (kiln) mid-run takes the sandbox with it.
    child = subprocess.Popen([sys.executable, "-c", """
import sys, time
sys.path.insert(0, %r)
from run_helper import Helper
h = Helper(%r); h.start()
h.spawn(["/bin/sh", "-c", "sleep 4949 & setsid -f sleep 4950; sleep 4951"])
print(h.proc.pid, flush=True)
time.sleep(100)
""" % (HERE, ws)], stdout=subprocess.PIPE, text=True)
    helper_pid = int(child.stdout.readline())
    time.sleep(0.2)
    before = len(pgrep("^sleep 49"))
    child.kill()
    child.wait()
    gone = wait_gone("^sleep 49")
    time.sleep(0.1)
    check("SIGKILL of the parent leaves no processes", before == 3 and gone and dead(helper_pid),
          "before=%d left=%s" % (before, pgrep("^sleep 49")))

    timings(ws)
    os.unlink(secret)
    return summary()


def comms_below(pid):
    """The command names of every descendant of `pid`, read from the host's /proc."""
    return [comm for _, comm in procs_below(pid)]


def procs_below(pid):
    """(pid, command name) of every descendant of `pid`, read from the host's /proc."""
    kids = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                rest = f.read().rsplit(")", 1)[1].split()
            with open("/proc/%s/comm" % d) as f:
                comm = f.read().strip()
        except OSError:
            continue
        kids.setdefault(int(rest[1]), []).append((int(d), comm))
    out, todo = [], [pid]
    while todo:
        for child, comm in kids.get(todo.pop(), []):
            out.append((child, comm))
            todo.append(child)
    return out


def wait_comms(pid, pred, seconds=3.0):
    deadline = time.time() + seconds
    while True:
        c = comms_below(pid)
        if pred(c) or time.time() >= deadline:
            return c
        time.sleep(0.02)


def spare_checks(ws):
    # pid 1 keeps a confined shepherd ready from the start, so even a sandbox's first exec finds
    # one; with single_exec (kiln's fresh sandboxes) it makes none after the exec has begun, and
    # a second exec still runs.
    for single in (False, True):
        hs = Helper(ws, single_exec=single)
        hs.start()
        c = wait_comms(hs.proc.pid, lambda c: "kiln-spare" in c)
        check("single_exec %s: a spare shepherd waits before the first request" % single, "kiln-spare" in c, str(c))
        r = hs.run(["/bin/echo", "one"])
        c = wait_comms(hs.proc.pid, lambda c: ("kiln-spare" in c) != single, 1.0)
        check("single_exec %s: %s spare shepherd after the first exec" % (single, "no" if single else "a"),
              r["exit_code"] == 0 and ("kiln-spare" in c) != single, json.dumps(r) + " " + str(c))
        r = hs.run(["/bin/echo", "two"])
        check("single_exec %s: a second exec still runs" % single, r["exit_code"] == 0 and r["stdout"] == "two\n",
              json.dumps(r))
        hs.shutdown()
    # A spare killed after its request was sent but before it read it (a command of the sandbox
    # may kill it, and a kill lands late) never ran anything: pid 1 gives the request to a new
    # shepherd and the exec runs once. Made certain here by stopping the spare before the request
    # and killing it after. But once kiln itself stops the exec, nothing is handed on.
    for kiln_kills in (False, True):
        hk = Helper(ws)
        hk.start()
        procs = []
        deadline = time.time() + 3
        while time.time() < deadline and not procs:
            procs = [p for p, c in procs_below(hk.proc.pid) if c == "kiln-spare"]
            time.sleep(0.02)
        marker = os.path.join(ws, "ran_%d" % kiln_kills)
        if not procs:
            check("a spare killed before it took its request (%s)" % kiln_kills, False, "no spare under the helper")
            hk.shutdown()
            continue
        os.kill(procs[0], signal.SIGSTOP)
        id_ = hk.next_id
        hk.next_id += 1
        r, w = os.pipe()
        os.close(w)
        out = tempfile.TemporaryFile()
        hk.send({"op": "exec", "id": id_, "argv": ["/bin/sh", "-c", "echo once >> %s; echo ran" % marker],
                 "env": {"PATH": "/usr/bin:/bin"}, "cwd": ws}, [r, out.fileno(), out.fileno()])
        os.close(r)
        time.sleep(0.1)
        if kiln_kills:
            hk.kill(id_)  # the kill op: pid 1 kills the stopped spare
        else:
            os.kill(procs[0], signal.SIGKILL)
        m = hk.wait_for(id_, ("exited", "error"), 10)
        time.sleep(0.1)
        ran = open(marker).read() if os.path.exists(marker) else ""
        if kiln_kills:
            check("a spare stopped, then the exec killed through pid 1: ends as an error, nothing runs",
                  m["op"] == "error" and ran == "", json.dumps(m) + " ran=%r" % ran)
        else:
            check("a spare killed before it took its request: the exec runs once, in a new shepherd",
                  m["op"] == "exited" and m.get("exit_code") == 0 and ran == "once\n", json.dumps(m) + " ran=%r" % ran)
        hk.shutdown()

    # A spare that cannot confine itself (seccomp() missing, as on a kernel without it) must still
    # answer the request it may already have been sent with a `confine` error naming seccomp, and
    # run nothing: at once after setup (the request can reach the spare before it fails) and later.
    nofeature = os.path.join(ws, "nofeature")
    subprocess.run(["cc", "-O1", "-o", nofeature, os.path.join(HERE, "..", "security", "probes", "nofeature.c")],
                   check=True)
    for pause in (0, 0.3):
        hn = Helper(ws, wrapper=[nofeature, "--no-seccomp", "--"])
        hn.start()
        time.sleep(pause)
        r = hn.run(["/bin/sh", "-c", "echo RAN > ran_unconfined"])
        err = r.get("error") or {}
        check("no seccomp, exec %s after setup: refused at step confine, naming seccomp" % ("at once" if not pause else "later"),
              err.get("step") == "confine" and "seccomp" in err.get("error", "") and
              not os.path.exists(os.path.join(ws, "ran_unconfined")), json.dumps(r))
        hn.shutdown()
    bad = Helper(ws, single_exec="yes")
    try:
        bad.start()
        bad.shutdown()
        check("spec single_exec must be a boolean", False, "the helper accepted \"yes\"")
    except SetupFailed as e:
        check("spec single_exec must be a boolean",
              any(l.get("step") == "spec" and "single_exec" in json.dumps(l) for l in e.lines), json.dumps(e.lines))


def finish_connect(sock):
    """SO_ERROR of a non-blocking socket once it is writable (bounded wait)."""
    import select
    select.select([], [sock], [], 10)
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)


def connect_checks(h_none, h_lo, host_port):
    # The connect op: pid 1 connects to the sandbox's own 127.0.0.1 and hands the socket over.
    id_, out, err, first = h_lo.spawn([PY, "-c", "import socket\ns=socket.socket(); s.bind(('127.0.0.1', 18181)); "
                                       "s.listen(8); print('ready', flush=True)\nc, _ = s.accept(); c.sendall(c.recv(100))"])
    deadline = time.time() + 10
    while time.time() < deadline and b"ready" not in (out.seek(0) or out.read()):
        time.sleep(0.05)
    m = h_lo.connect(18181)
    echoed = b""
    if m["op"] == "connected" and len(m.get("_fds", [])) == 1:
        c = socket.socket(fileno=m["_fds"][0])
        if finish_connect(c) == 0:
            c.setblocking(True)
            c.settimeout(10)
            c.sendall(b"through pid 1")
            echoed = c.recv(100)
        c.close()
    check("connect op: a socket to the sandbox's own loopback listener, bytes both ways",
          echoed == b"through pid 1", json.dumps({k: v for k, v in m.items()}))
    h_lo.wait_for(id_, ("exited", "error"), 10)
    # The host's listener on the same port number is not what pid 1 reaches.
    m = h_lo.connect(host_port)
    refused = m["op"] == "error" and m.get("errno") == 111
    if m["op"] == "connected":
        c = socket.socket(fileno=m["_fds"][0])
        refused = finish_connect(c) == 111
        c.close()
    check("connect op: the host's loopback listener is not reachable (ECONNREFUSED)", refused, json.dumps(m))
    bad = [h_lo.connect(p) for p in (0, 65536, "80")]
    check("connect op: a bad port is refused naming it",
          all(b["op"] == "error" and b["step"] == "request" and str(p) in b["error"]
              for b, p in zip(bad, (0, 65536, '"80"'))), json.dumps(bad))
    m = h_none.connect(18181)
    check("connect op: network none (lo down) fails with ENETUNREACH", m["op"] == "error" and m["step"] == "connect"
          and m.get("errno") == 101, json.dumps(m))


def timings(ws):
    # Baselines measured in the same run: the machine is shared, absolute numbers drift a lot.
    def median_ms(fn, n):
        ts = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            ts.append((time.perf_counter() - t) * 1000)
        return statistics.median(ts), min(ts)
    base = median_ms(lambda: subprocess.run(["/bin/true"]), 50)
    unsh = median_ms(lambda: subprocess.run(["unshare", "-Urmnpiu", "--fork", "/bin/true"]), 30)
    print("TIMING baseline subprocess /bin/true: median %.2f ms (min %.2f)" % base)
    print("TIMING baseline unshare -Urmnpiu --fork /bin/true: median %.2f ms (min %.2f)" % unsh)
    starts = []
    for _ in range(30):
        t = time.perf_counter()
        hh = Helper(ws)
        hh.start()
        hh.run(["/bin/true"])
        starts.append((time.perf_counter() - t) * 1000)
        hh.shutdown()
    hh = Helper(ws)
    hh.start()
    execs = []
    for _ in range(100):
        t = time.perf_counter()
        hh.run(["/bin/true"])
        execs.append((time.perf_counter() - t) * 1000)
    hh.shutdown()
    print("TIMING start+exec+shutdown of /bin/true: median %.2f ms (min %.2f)" % (statistics.median(starts), min(starts)))
    print("TIMING one exec of /bin/true in a running helper: median %.2f ms (min %.2f)"
          % (statistics.median(execs), min(execs)))


if __name__ == "__main__":
    if sys.argv[1:] == ["--timing"]:
        timings(tempfile.mkdtemp(prefix="kiln-helper-timing-"))
        sys.exit(0)
    sys.exit(main())
