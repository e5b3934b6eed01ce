#!/usr/bin/env python3
# Drives kiln-sandbox directly through HELPER_PROTOCOL.md (spec pipe, status pipe, SEQPACKET control
# socket with SCM_RIGHTS), so the helper can be checked without the rest of kiln.
import array
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_BINARY = os.environ.get("KILN_SANDBOX", os.path.join(HERE, "..", "..", "build", "kiln-sandbox"))

DEFAULT_RO = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc/ld.so.cache",
              "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/alternatives", "/etc/passwd", "/etc/group",
              "/etc/nsswitch.conf", "/etc/localtime", "/etc/ssl", "/etc/ca-certificates"]

DEFAULT_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LANG": "C.UTF-8"}


class SetupFailed(Exception):
    def __init__(self, lines, code):
        super().__init__("setup failed (exit %s): %s" % (code, lines[-1] if lines else "no status"))
        self.lines = lines
        self.code = code


class Helper:
    def __init__(self, workspace, binary=None, wrapper=(), **spec_overrides):
        self.binary = os.path.abspath(binary or os.environ.get("KILN_SANDBOX", DEFAULT_BINARY))
        self.wrapper = list(wrapper)  # argv put before the helper's (e.g. a probe that removes a feature)
        spec = {"id": "sb_test", "workspace": workspace, "workspace_writable": True, "ro_binds": DEFAULT_RO,
                "network": "none", "hostname": "kiln", "tmp_size_mb": 64, "cgroups": [],
                "seccomp": True, "landlock": True}
        spec.update(spec_overrides)
        self.spec = spec
        self.workspace = workspace
        self.next_id = 1
        self.status = []
        self.pending = []  # control messages read while waiting for another id

    def start(self):
        spec_r, spec_w = os.pipe()
        st_r, st_w = os.pipe()
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        fds = (spec_r, st_w, theirs.fileno())
        self.proc = subprocess.Popen(
            self.wrapper + [self.binary, "--spec-fd", str(spec_r), "--status-fd", str(st_w), "--control-fd", str(theirs.fileno())],
            pass_fds=fds, stdin=subprocess.DEVNULL)
        os.close(spec_r)
        os.close(st_w)
        theirs.close()
        try:
            os.write(spec_w, json.dumps(self.spec).encode())
        except BrokenPipeError:
            pass  # it exited before reading its spec: its status lines and exit code say why
        finally:
            os.close(spec_w)
        with os.fdopen(st_r, "rb") as f:
            data = f.read()
        self.status = [json.loads(l) for l in data.decode().splitlines() if l.strip()]
        if not self.status or self.status[-1].get("step") != "ready":
            code = self.proc.wait()
            raise SetupFailed(self.status, code)
        return self.status

    def send(self, obj, fds=()):
        anc = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
        self.sock.sendmsg([json.dumps(obj).encode()], anc)

    def recv(self, timeout=None):
        self.sock.settimeout(timeout)
        try:
            data, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 4)
        finally:
            self.sock.settimeout(None)
        if not data:
            for f in fds:
                os.close(f)
            return None
        m = json.loads(data)
        if fds:
            m["_fds"] = fds  # the receiver owns them (a `connected` reply's socket)
        return m

    def wait_for(self, id_, ops, timeout=60):
        deadline = time.time() + timeout
        for i, m in enumerate(self.pending):
            if m.get("id") == id_ and m["op"] in ops:
                return self.pending.pop(i)
        while True:
            m = self.recv(max(0.01, deadline - time.time()))
            if m is None:
                raise EOFError("helper closed the control channel")
            if m.get("id") == id_ and m["op"] in ops:
                return m
            self.pending.append(m)

    def spawn(self, argv, env=None, cwd=None, stdin=b"", rlimits=None, cgroup_fd=None, setsid=True):
        """Starts a command; returns (id, stdout file, stderr file, first reply)."""
        id_ = self.next_id
        self.next_id += 1
        out = tempfile.TemporaryFile()
        err = tempfile.TemporaryFile()
        r, w = os.pipe()
        if stdin:
            os.write(w, stdin)
        os.close(w)
        req = {"op": "exec", "id": id_, "argv": argv, "env": env if env is not None else DEFAULT_ENV,
               "cwd": cwd or self.workspace, "setsid": setsid}
        if rlimits:
            req["rlimits"] = rlimits
        fds = [r, out.fileno(), err.fileno()] + ([cgroup_fd] if cgroup_fd is not None else [])
        self.send(req, fds)
        os.close(r)
        first = self.wait_for(id_, ("started", "error"))
        return id_, out, err, first

    def run(self, argv, timeout=60, **kw):
        """Runs a command to its exit; returns dict with exit, stdout, stderr (or error)."""
        id_, out, err, first = self.spawn(argv, **kw)
        if first["op"] == "error":
            return {"error": first, "exit_code": None, "stdout": "", "stderr": ""}
        ex = self.wait_for(id_, ("exited", "error"), timeout)
        out.seek(0)
        err.seek(0)
        return {"exit_code": ex.get("exit_code"), "signal": ex.get("signal"), "report": ex,
                "stdout": out.read().decode(errors="replace"), "stderr": err.read().decode(errors="replace")}

    def sh(self, script, **kw):
        return self.run(["/bin/sh", "-c", script], **kw)

    def connect(self, port, timeout=10):
        """The `connect` op; returns its reply (a `connected` one carries the socket in `_fds`)."""
        id_ = self.next_id
        self.next_id += 1
        self.send({"op": "connect", "id": id_, "port": port})
        return self.wait_for(id_, ("connected", "error"), timeout)

    def kill(self, id_, sig=9):
        self.send({"op": "kill", "id": id_, "signal": sig})

    def shutdown(self):
        try:
            self.send({"op": "shutdown"})
        except OSError:
            pass
        code = self.proc.wait(10)
        self.sock.close()
        return code

    def close(self):
        self.sock.close()
        return self.proc.wait(10)


def main():
    import argparse
    ap = argparse.ArgumentParser(description="run one command in a kiln-sandbox")
    ap.add_argument("--workspace", default=os.getcwd())
    ap.add_argument("--network", default="none")
    ap.add_argument("--binary")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    h = Helper(a.workspace, a.binary, network=a.network)
    try:
        for line in h.start():
            print("status:", json.dumps(line))
    except SetupFailed as e:
        for line in e.lines:
            print("status:", json.dumps(line))
        print("helper exit:", e.code)
        return 1
    res = h.run(cmd or ["/bin/true"])
    sys.stdout.write(res["stdout"])
    sys.stderr.write(res["stderr"])
    print("result:", json.dumps(res.get("report") or res.get("error")))
    print("helper exit:", h.shutdown())
    return 0 if res["exit_code"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
