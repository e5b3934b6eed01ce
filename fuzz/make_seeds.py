#!/usr/bin/env python3
"""Writes fuzz/corpus/<target>/ and fuzz/dict/<target>.dict: the seed inputs the fuzzers start from.

Seeds come from the wire transcripts (tests/wire/cases), the report fixtures (tests/fixtures/reports),
examples/ and hand-written cases; rerun after changing any of them. Files are named by content hash,
so rerunning is idempotent.
"""
import hashlib
import json
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
DICT = ROOT / "fuzz" / "dict"


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()[:16]).write_bytes(data)


def j(obj):
    return json.dumps(obj, separators=(",", ":"))


# ---- messages of the wire transcripts -----------------------------------------------------------
wire_sessions = []
wire_streams = []  # (framing byte, raw stream bytes)
for case in sorted((ROOT / "tests/wire/cases").glob("*.wire")):
    msgs, raw = [], b""
    for line in case.read_text().splitlines():
        if line.startswith("> "):
            msgs.append(line[2:])
            raw += line[2:].encode() + b"\n"
        elif line.startswith(">cl "):
            body = line[4:].encode()
            msgs.append(line[4:])
            raw += b"Content-Length: %d\r\n\r\n" % len(body) + body
        elif line.startswith(">> "):
            raw += json.loads(line[3:]).encode("utf-8", "surrogateescape")
        elif line.startswith(">pad "):
            n, body = line[5:].split(" ", 1)
            msgs.append(body.replace("$PAD", "x" * 40))
            raw += body.replace("$PAD", "x" * 40).encode() + b"\n"
    if msgs:
        wire_sessions.append("\n".join(m for m in msgs if m.strip()))
    if raw:
        wire_streams.append(raw)

INIT = j({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}})
INIT_ROOTS = j({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {"roots": {"listChanged": True}},
                           "clientInfo": {"name": "fuzz", "version": "0"}}})
INITED = j({"jsonrpc": "2.0", "method": "notifications/initialized"})


def call(i, tool, args, meta=None):
    p = {"name": tool, "arguments": args}
    if meta:
        p["_meta"] = meta
    return j({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": p})


def req(i, method, params=None):
    m = {"jsonrpc": "2.0", "id": i, "method": method}
    if params is not None:
        m["params"] = params
    return j(m)


TOOL_ARGS = {
    "workspace_open": [{"name": "fuzz"}, {"name": "scratch", "create": True}, {"path": "/etc"}, {"path": "~/ws"}],
    "workspace_list": [{}],
    "workspace_info": [{}, {"workspace": "fuzz"}],
    "file_read": [{"path": "README.md"}, {"path": "src/main.c", "offset": 1, "limit": 1}, {"path": "escape/secret.txt"},
                  {"path": "../outside/secret.txt"}, {"path": "site/index.html", "encoding": "base64"}],
    "file_write": [{"path": "new/file.txt", "content": "hi\n", "create_dirs": True},
                   {"path": "README.md", "content": "aGk=", "encoding": "base64"},
                   {"path": "escape/x", "content": "no"}, {"path": "README.md", "content": "x", "if_sha256": "00"}],
    "file_edit": [{"path": "README.md", "edits": [{"old_text": "hello", "new_text": "bye"}]},
                  {"path": "README.md", "edits": [{"old_text": "TODO", "new_text": "DONE"}], "dry_run": True}],
    "file_move": [{"from": "README.md", "to": "docs/README.md"}, {"from": "src", "to": "escape/src", "overwrite": True}],
    "file_delete": [{"path": "README.md"}, {"path": "src", "recursive": True}, {"path": "."}],
    "file_list": [{}, {"path": "src", "depth": 2, "glob": "*.c"}, {"include_ignored": True, "offset": 1, "limit": 2}],
    "file_search": [{"pattern": "hello"}, {"pattern": "h(e|a)llo", "literal": False, "context_lines": 1},
                    {"pattern": "TODO", "glob": "**/*.md", "case_sensitive": False, "max_results": 1}],
    "sandbox_create": [{}, {"network": "none", "limits": {"memory_mb": 64}}, {"isolation": "none"}],
    "sandbox_exec": [{"command": "echo hi"}, {"command": ["ls", "-l"], "cwd": "src", "timeout_s": 1},
                     {"command": "cat", "stdin": "x", "env": {"A": "b"}, "background": True},
                     {"command": "true", "sandbox_id": "sb_nope"}, {"command": "x", "cwd": "../.."}],
    "sandbox_list": [{}],
    "sandbox_destroy": [{"sandbox_id": "sb_1"}],
    "process_output": [{"run_id": "run_1", "stream": "stdout", "offset": 0, "limit": 10, "wait_ms": 0}],
    "process_input": [{"run_id": "run_1", "data": "x", "close": True}],
    "process_kill": [{"run_id": "run_1", "signal": "TERM"}],
    "trace_list": [{}, {"kind": "exec", "status": "fail", "limit": 5}],
    "trace_get": [{"trace_id": "tr_1"}],
    "trace_output": [{"trace_id": "tr_1", "stream": "stderr", "grep": "err"}],
    "verify": [{}, {"checks": ["test"]}, {"checks": ["nope"]}],
    "publish": [{"path": "site"}, {"path": "site", "name": "demo", "share": "password", "password": "pw12345678"},
                {"path": "site", "share": "invite", "invite": ["bob"], "expires_in_s": 60}, {"path": "README.md"}],
    "publish_list": [{}],
    "publish_share": [{"artifact": "demo", "share": "public"}, {"artifact": "demo", "revoke": ["bob"]}],
    "unpublish": [{"artifact": "demo"}, {"artifact": "demo", "version": 1}],
}

# ---- jsonrpc -------------------------------------------------------------------------------------
for s in wire_sessions:
    for m in s.split("\n"):
        put("fuzz_jsonrpc", m)
for m in [INIT, INITED, req(1, "ping"), req("a", "tools/list", {"cursor": "x"}),
          j({"jsonrpc": "2.0", "id": 3, "result": {"roots": []}}),
          j({"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "x"}}),
          j({"jsonrpc": "2.0", "id": None, "error": {"code": -1, "message": "x"}}),
          "[" * 300 + "]" * 300, "\"\\ud800\"", "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"x\"}", "\xff\xfe"]:
    put("fuzz_jsonrpc", m)

# ---- framing: [limit byte][chunk seed][mode 0|1|2] + stream ------------------------------------
for raw in wire_streams:
    put("fuzz_framing", b"\xff\x07\x00" + raw)
put("fuzz_framing", b"\x04\x03\x00" + b"{\"a\":1}\n" + b"x" * 100 + b"\n{}\r\n")
put("fuzz_framing", b"\x20\x05\x02" + b"{}\r\n")
put("fuzz_framing", b"\x20\x05\x00Content-Length: 2\r\n\r\n{}content-length:3\r\n\r\n[1]Garbage\r\n\r\nContent-Length: 2\r\n\r\n{}")
put("fuzz_framing", b"\x01\x09\x00Content-Length: 99999999\r\n\r\nxx")
put("fuzz_framing", b"\x30\x02\x00Content-Length: 1\r\nContent-Length: 2\r\n\r\n{}")
put("fuzz_framing", b"\x30\x02\x01\"x\":1}\n\n\n   \n")

# ---- session: one message per line -------------------------------------------------------------
for s in wire_sessions:
    put("fuzz_session", s)
n = 1
for tool, variants in TOOL_ARGS.items():
    lines = [INIT, INITED]
    for a in variants:
        lines.append(call(n, tool, a))
        n += 1
    put("fuzz_session", "\n".join(lines))
put("fuzz_session", "\n".join([INIT, INITED, req(1, "resources/list"), req(2, "resources/templates/list"),
                               req(3, "resources/read", {"uri": "file:///nope"}), req(4, "prompts/list"),
                               req(5, "prompts/get", {"name": "x", "arguments": {}}),
                               req(6, "completion/complete", {"ref": {"type": "ref/resource", "uri": "file:///{path}"},
                                                               "argument": {"name": "path", "value": "sr"}}),
                               req(7, "resources/subscribe", {"uri": "file:///x"}), req(8, "logging/setLevel", {"level": "debug"}),
                               req(9, "resources/unsubscribe", {"uri": "file:///x"})]))
put("fuzz_session", "\n".join([INIT_ROOTS, INITED, j({"jsonrpc": "2.0", "id": 0, "result": {"roots": [{"uri": "file:///", "name": "all"}]}}),
                               call(1, "file_list", {}), j({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})]))
put("fuzz_session", "\n".join([INIT, INITED, call(1, "file_search", {"pattern": "x"}, {"progressToken": "p"}),
                               j({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
                               req(1, "ping"), req(1, "ping")]))

# The 2026-07-28 era: stateless requests with the envelope, listen, tasks.
MODERN = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
MODERN_TASKS = dict(MODERN, **{"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}},
                               "io.modelcontextprotocol/logLevel": "debug"})
put("fuzz_session", "\n".join([req(1, "server/discover", {"_meta": MODERN}), req(2, "tools/list", {"_meta": MODERN}),
                               call(3, "file_list", {}, MODERN), req(4, "logging/setLevel", {"level": "debug", "_meta": MODERN}),
                               req(5, "tools/list", {"_meta": {"io.modelcontextprotocol/protocolVersion": "1999-01-01"}})]))
put("fuzz_session", "\n".join([req("l", "subscriptions/listen", {"notifications": {"resourceSubscriptions": ["file:///x"]}, "_meta": MODERN}),
                               req("m", "subscriptions/listen", {"notifications": {}, "_meta": MODERN}),
                               j({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "m"}}),
                               call(6, "file_write", {"path": "a.txt", "content": "x"}, MODERN)]))
put("fuzz_session", "\n".join([call(7, "sandbox_exec", {"command": "true"}, MODERN_TASKS),
                               req(8, "tasks/get", {"taskId": "task-0", "_meta": MODERN_TASKS}),
                               req(9, "tasks/cancel", {"taskId": "task-0", "_meta": MODERN_TASKS}),
                               req(10, "tasks/update", {"taskId": "task-0", "inputResponses": {}, "_meta": MODERN_TASKS}),
                               INIT, INITED, req(11, "tasks/list"), req(12, "tasks/result", {"taskId": "task-0"}),
                               j({"jsonrpc": "2.0", "id": 13, "method": "tools/call",
                                  "params": {"name": "verify", "arguments": {}, "task": {"ttl": 1000}}})]))

# ---- tool arguments: "NAME\nARGS" ---------------------------------------------------------------
for tool, variants in TOOL_ARGS.items():
    for a in variants:
        put("fuzz_tool_args", tool + "\n" + j(a))

# ---- path resolver: [flags] + path ---------------------------------------------------------------
for flags in (0, 1, 2, 3, 4, 5, 6 | 8, 7 | 8):
    for p in ["src/main.c", "./a/b/../b/c.txt", "/", ".", "..", "../outside/secret.txt", "out/secret.txt", "passwd",
              "in", "ab/c.txt", "a/loop/main.c", "magic/etc/passwd", "self", "a//b///c.txt", "new/dir/file",
              "a/b/c.txt/", "src/\n", "x\x00y"]:
        put("fuzz_path_resolver", bytes([flags]) + p.encode())

# ---- kiln.json -----------------------------------------------------------------------------------
for f in ROOT.glob("examples/**/kiln.json"):
    put("fuzz_kiln_config", f.read_bytes())
for text in re.findall(r'R"\((.*?)\)"', (ROOT / "tests/unit/workspace/kiln_config_test.cpp").read_text(), re.S):
    if text.lstrip().startswith("{"):
        put("fuzz_kiln_config", text)
put("fuzz_kiln_config", j({"verify": [{"name": "t", "run": ["make", "test"], "cwd": "a/b", "timeout_s": 5,
                                       "env": {"CI": "1"}, "report": {"format": "tap", "path": "out/t.tap"}}],
                           "sandbox": {"network": "loopback", "limits": {"memory_mb": 256}},
                           "publish": {"path": "site", "name": "demo", "share": "invite"}}))

# ---- reports -------------------------------------------------------------------------------------
for f in sorted((ROOT / "tests/fixtures/reports").glob("*")):
    if f.is_file() and f.suffix in (".xml", ".tap", ".txt"):
        put("fuzz_junit" if f.suffix == ".xml" else "fuzz_tap", f.read_bytes())
put("fuzz_junit", "<testsuites><testsuite name=\"a\"><testcase classname=\"x\" name=\"y\" file=\"t.py\" line=\"3\">"
                  "<error message=\"e\"><![CDATA[Traceback\n  File \"/x/t.py\", line 3, in y]]></error></testcase>"
                  "<testcase name=\"s\"><skipped/></testcase></testsuite></testsuites>")
put("fuzz_tap", "TAP version 14\n1..3\nok 1 - a\nnot ok 2 - b\n  ---\n  message: boom\n  at: t.js:3:1\n  ...\n"
                "ok 3 # SKIP no\n# Subtest: s\n    ok 1 - c\n    1..1\nok 4 - s # TODO later\n")

# ---- HTTP router: flags, method, target, Cookie, Authorization, Range, If-None-Match, If-Range,
# Content-Type, Accept, body -----------------------------------------------------------------------
def http(flags, method, target, cookie="", auth="", rng="", inm="", ir="", ctype="", accept="", body=""):
    return "\n".join([chr(flags), method, target, cookie, auth, rng, inm, ir, ctype, accept, body])


for r in [http(1, "GET", "/a/site/"), http(0, "HEAD", "/a/site/about"), http(1, "GET", "/a/site/v/1/docs"),
          http(0, "GET", "/a/site/data.txt", rng="bytes=10-20"), http(0, "GET", "/a/site/data.txt", rng="bytes=-5"),
          http(0, "GET", "/a/site/data.txt", rng="bytes=9999-", ir="\"abc\""), http(1, "GET", "/a/site/nope.png"),
          http(0, "GET", "/a/site/", inm="W/\"x\", *"), http(2, "GET", "/healthz"), http(0, "GET", "/a/report/"),
          http(0, "GET", "/a/site/%2e%2e/secret/"), http(0, "GET", "/a/site/..%2fsecret"), http(0, "DELETE", "/a/site/"),
          http(0, "GET", "/a/secret/", accept="text/html"), http(0, "GET", "/a/secret/", cookie="kiln_session={S}"),
          http(0, "GET", "/a/secret/", auth="Basic dXNlcjp3cm9uZw=="),
          http(0, "POST", "/a/secret/_kiln/login", ctype="application/x-www-form-urlencoded", body="password=x&next=%2Fa%2Fsecret%2Fdocs%2F"),
          http(0, "GET", "/a/secret/_kiln/login?next=/a/secret/about"), http(0, "GET", "/a/secret/_kiln/logout"),
          http(0, "GET", "/a/club/?invite={I}"), http(0, "GET", "/a/club/about", cookie="a=b; kiln_session=\"{C}\""),
          http(0, "GET", "/a/club/?invite=wrong"), http(1, "GET", "/a/site?x=1"), http(0, "GET", "//evil.example/"),
          http(0, "GET", "/a/site/\\..\\"), http(0, "GET", "/a/Site/"), http(0, "GET", "/a/site/v/0/")]:
    put("fuzz_http_router", r)

# ---- login form: body, Cookie, Authorization, artifact name, next/error ---------------------------
for r in ["password=hunter2&next=%2Fa%2Fsite%2Fdocs%2F\nkiln_session=abc; other=1\nBasic dXNlcjpwYXNz\nsite\n",
          "password=a+b%20c&next=//evil.example\n\nBasic Og==\nsite\n/a/site/../../x",
          "next=%2Fa%2Fsite%2F_kiln%2Flogin&error=%3Cscript%3E\nkiln_session=\"q\"\nbasic !!!\nsite\n<b>",
          "%zz=1&=&&a=%41\n;;=;\nBearer x\nmy-site\n/a/my-site/x\\y"]:
    put("fuzz_login_form", r)

# ---- dictionaries --------------------------------------------------------------------------------
JSON_TOKENS = ['"jsonrpc"', '"2.0"', '"id"', '"method"', '"params"', '"result"', '"error"', '"code"', '"message"',
               '"data"', "null", "true", "false", "{}", "[]", '":"', '","', "-32700", "9223372036854775807", "1e999",
               '"\\u0000"', '"\\ud800"']
METHODS = ["initialize", "notifications/initialized", "ping", "tools/list", "tools/call", "resources/list",
           "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe", "prompts/list",
           "prompts/get", "completion/complete", "logging/setLevel", "notifications/cancelled",
           "notifications/roots/list_changed", "notifications/progress", "roots/list", "server/discover",
           "subscriptions/listen", "tasks/get", "tasks/cancel", "tasks/update", "tasks/result", "tasks/list"]
MCP_KEYS = ["protocolVersion", "capabilities", "clientInfo", "roots", "uri", "name", "arguments", "_meta",
            "progressToken", "requestId", "cursor", "level", "ref", "argument", "value", "file:///", "kiln://trace/",
            "2025-11-25", "2025-06-18", "2025-03-26", "2026-07-28", "io.modelcontextprotocol/protocolVersion",
            "io.modelcontextprotocol/clientCapabilities", "io.modelcontextprotocol/clientInfo",
            "io.modelcontextprotocol/logLevel", "io.modelcontextprotocol/tasks", "extensions", "notifications",
            "resourceSubscriptions", "taskId", "task", "ttl"]
tool_keys = sorted({k for v in TOOL_ARGS.values() for a in v for k in a} | set(TOOL_ARGS))


def write_dict(name, tokens):
    DICT.mkdir(parents=True, exist_ok=True)
    lines = []
    for t in tokens:
        b = t.encode() if isinstance(t, str) else t
        esc = "".join(chr(c) if 0x20 <= c < 0x7f and c not in (0x22, 0x5c) else "\\x%02x" % c for c in b)
        lines.append('"%s"' % esc)
    (DICT / (name + ".dict")).write_text("\n".join(sorted(set(lines))) + "\n")


write_dict("fuzz_jsonrpc", JSON_TOKENS + ['"%s"' % m for m in METHODS])
write_dict("fuzz_session", JSON_TOKENS + ['"%s"' % m for m in METHODS + MCP_KEYS + tool_keys] + ["\n"])
write_dict("fuzz_tool_args", JSON_TOKENS + ['"%s"' % k for k in tool_keys] + ["..", "../", "/", "~/", "**/*", "\\n"])
write_dict("fuzz_framing", ["Content-Length:", "content-length: ", "Content-Type: application/vscode-jsonrpc", "\r\n",
                            "\r\n\r\n", "\n", "{", "}"])
write_dict("fuzz_kiln_config", JSON_TOKENS + ['"%s"' % k for k in
           ["verify", "name", "run", "cwd", "timeout_s", "env", "report", "format", "junit", "tap", "path",
            "on_failure", "stop", "continue", "description", "sandbox", "network", "none", "loopback", "host",
            "limits", "memory_mb", "pids", "cpu_s", "output_bytes", "file_size_mb", "secrets", "isolation",
            "publish", "share", "public", "password", "invite", ".."]])
write_dict("fuzz_junit", ["<testsuites>", "<testsuite", "<testcase", "<failure", "<error", "<skipped/>", "<system-out>",
                          "</testcase>", "name=", "classname=", "file=", "line=", "message=", "tests=", "failures=",
                          "<![CDATA[", "]]>", "<?xml version=\"1.0\"?>", "&amp;", "&#x0;", "File \"", "\", line ",
                          "    at ", ".js:", ".py:"])
write_dict("fuzz_tap", ["TAP version 14\n", "TAP version 13\n", "1..", "ok ", "not ok ", " - ", "# SKIP", "# TODO",
                        "Bail out!", "# Subtest: ", "    ", "  ---\n", "  ...\n", "message: ", "at: ", "stack: |-\n",
                        "severity: fail", "location: ", "file: ", "line: ", "\n"])
HTTP = ["GET", "HEAD", "POST", "/a/", "site", "secret", "club", "report", "/v/", "/_kiln/login", "/_kiln/logout",
        "/healthz", "index.html", "404.html", "?invite=", "{I}", "{S}", "{C}", "kiln_session=", "Basic ", "bytes=",
        "-", ",", "W/\"", "\"", "*", "application/x-www-form-urlencoded", "text/html", "password=", "next=", "&",
        "%2e", "%2f", "%00", "%", "..", "//", "\\", "\n"]
write_dict("fuzz_http_router", HTTP)
write_dict("fuzz_login_form", HTTP + ["<", ">", "'", "+", "=", ";", "\"", "/a/site/"])
write_dict("fuzz_path_resolver", ["..", "../", "./", "/", "//", "out", "passwd", "in", "ab", "magic", "self", "a/loop",
                                  "src/main.c", "/proc/self/root", "\x00", "\n"])
