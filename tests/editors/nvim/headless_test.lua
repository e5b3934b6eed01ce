-- kiln.nvim against the real `kiln mcp`, headless: every :Kiln subcommand, the quickfix list,
-- scratch buffers and their keys, cancellation, restarts, :checkhealth and the help file.
-- Run by run.sh from a copy of examples/sample-project (the cwd), with KILN_BIN, KILN_HOME and
-- KILN_TEST_TMP set; prints "N passed, M failed" and exits non-zero on any failure.
local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h')
package.path = here .. '/?.lua;' .. package.path
local T = require('harness')
local kiln = require('kiln')
local uv = vim.uv or vim.loop

local WS = vim.fn.resolve(vim.fn.getcwd())
local TMP = assert(os.getenv('KILN_TEST_TMP'), 'KILN_TEST_TMP is not set')
local KILN_HOME = assert(os.getenv('KILN_HOME'), 'KILN_HOME is not set')
local BIN = os.getenv('KILN_BIN')
local ERROR, WARN = vim.log.levels.ERROR, vim.log.levels.WARN
local state = kiln._state

-- up.test is the local upstream of the network allowlist test: the kiln the plugin starts inherits
-- this (KILN_EGRESS_HOSTS maps names for Kiln's egress proxy).
local EGRESS_HOSTS = TMP .. '/egress-hosts'
vim.fn.writefile({ '127.0.0.1 up.test' }, EGRESS_HOSTS)
vim.env.KILN_EGRESS_HOSTS = EGRESS_HOSTS

-- Echoed lines (progress, :Kiln status) are recorded rather than written to the test log.
local echoed = {}
vim.api.nvim_echo = function(chunks)
  local parts = {}
  for _, c in ipairs(chunks) do
    parts[#parts + 1] = c[1]
  end
  table.insert(echoed, table.concat(parts))
end

local function session()
  local s
  kiln.session(function(err, ss)
    s = err and { err = err } or ss
  end)
  T.wait(20000, function()
    return s
  end, 'the kiln session')
  T.ok(not s.err, 'session started: ' .. tostring(s.err))
  return s
end

-- A session of its own (not the plugin's), started and waited for; stop_session waits for its end.
local function start_session(opts, what)
  local s = require('kiln.mcp').new(opts)
  local ready
  s:start(function(err)
    ready = { err = err }
  end)
  T.wait(15000, function()
    return ready
  end, what)
  T.eq(ready.err, nil, what .. ' started')
  return s
end

local function stop_session(s, what)
  local stopped
  s:stop(function()
    stopped = true
  end)
  T.wait(5000, function()
    return stopped
  end, what .. ' to stop')
end

local function find_buf(pat)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b):match(pat) then
      return b
    end
  end
end

--- :Kiln open DIR (the cwd without one), waiting for the message that names the workspace.
local function open_workspace(dir, name)
  local from = T.mark()
  vim.cmd('Kiln open' .. (dir and (' ' .. vim.fn.fnameescape(dir)) or ''))
  T.wait(10000, function()
    return T.note('workspace ' .. (name or ''), nil, from)
  end, 'open ' .. (dir or 'cwd'))
end

--- The number of the first line of `lines` that matches `pat`.
local function line_matching(lines, pat)
  for i, l in ipairs(lines) do
    if l:match(pat) then
      return i
    end
  end
end

local function nn_id(res)
  return res and res.trace_id ~= vim.NIL and res.trace_id or nil
end

local function last_run()
  return state.runs[state.run_seq]
end

local function run_finished(run)
  local l = T.lines(run.buf)
  return l[#l]:match('^%[') and not run.handle
end

local function wait_verify(from)
  T.wait(60000, function()
    return state.verify == nil and T.note('verify', nil, from)
  end, 'verify to finish')
end

local function feed(keys)
  vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes(keys, true, false, true), 'x', false)
end

local function call(tool, args)
  local r
  kiln.call(tool, args, function(err, value)
    r = { err = err, value = value }
  end)
  T.wait(20000, function()
    return r
  end, tool)
  return r
end

local function base64(s)
  local chars = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'
  return ((s:gsub('.', function(c)
    local byte, bits = c:byte(), ''
    for i = 8, 1, -1 do
      bits = bits .. (byte % 2 ^ i - byte % 2 ^ (i - 1) > 0 and '1' or '0')
    end
    return bits
  end) .. '0000'):gsub('%d%d%d?%d?%d?%d?', function(x)
    if #x < 6 then
      return ''
    end
    local c = 0
    for i = 1, 6 do
      c = c + (x:sub(i, i) == '1' and 2 ^ (6 - i) or 0)
    end
    return chars:sub(c + 1, c + 1)
  end) .. ({ '', '==', '=' })[#s % 3 + 1])
end

--- GET `url` (http://127.0.0.1:PORT/...) over libuv, optionally with Basic auth; returns the HTTP
--- status and body. No curl needed.
local function http_get(url, user, password)
  local host, port, path = url:match('^http://([%d%.]+):(%d+)(/.*)$')
  assert(host, 'not a local http URL: ' .. url)
  local tcp = uv.new_tcp()
  local chunks, done = {}, false
  tcp:connect(host, tonumber(port), function(err)
    if err then
      done = true
      return
    end
    local req = 'GET ' .. path .. ' HTTP/1.1\r\nHost: ' .. host .. ':' .. port .. '\r\nConnection: close\r\n'
    if user then
      req = req .. 'Authorization: Basic ' .. base64(user .. ':' .. password) .. '\r\n'
    end
    tcp:write(req .. '\r\n')
    tcp:read_start(function(rerr, data)
      if rerr or not data then
        done = true
        tcp:close()
        return
      end
      chunks[#chunks + 1] = data
    end)
  end)
  T.wait(5000, function()
    return done
  end, 'GET ' .. url)
  local resp = table.concat(chunks)
  local status = tonumber(resp:match('^HTTP/1%.%d (%d+)'))
  return status, resp:match('\r\n\r\n(.*)$') or ''
end

local function pid_alive(pid)
  return pid and uv.kill(pid, 0) == 0
end

-- 1 ----------------------------------------------------------------------------------------------
T.test('the plugin defines :Kiln with completion of subcommands and their arguments', function()
  T.eq(vim.fn.exists(':Kiln'), 2, ':Kiln exists')
  T.eq(vim.g.loaded_kiln, 1, 'g:loaded_kiln')
  T.eq(vim.fn.getcompletion('Kiln ', 'cmdline'), kiln.subcommands, 'subcommands')
  T.eq(vim.fn.getcompletion('Kiln resta', 'cmdline'), { 'restart' }, 'prefix')
  local tr = vim.fn.getcompletion('Kiln traces ', 'cmdline')
  T.ok(vim.tbl_contains(tr, 'verify') and vim.tbl_contains(tr, 'fail'), 'traces kinds and statuses: ' .. vim.inspect(tr))
  T.eq(vim.fn.getcompletion('Kiln publish src ', 'cmdline'), { 'public', 'password', 'invite' }, 'share modes')
  T.ok(vim.tbl_contains(vim.fn.getcompletion('Kiln publish s', 'cmdline'), 'src/'), 'publish completes paths')
  T.ok(vim.tbl_contains(vim.fn.getcompletion('Kiln open t', 'cmdline'), 'test/'), 'open completes folders')
end)

T.test('setup{} reports unknown and mistyped options and keeps the defaults for them', function()
  local from = T.mark()
  local problems = kiln.setup({ cmd = BIN, bogus = 1, open_quickfix = 'yes', progress = 'loud' })
  T.eq(#problems, 3, 'three problems: ' .. vim.inspect(problems))
  T.ok(T.note('unknown option "bogus"', WARN, from), 'warned about bogus')
  T.eq(require('kiln.config').options.open_quickfix, true, 'bad value not taken')
  T.eq(#kiln.setup({ cmd = BIN, env = { KILN_SERVE_LISTEN = '127.0.0.1:0' }, log_level = 'debug' }), 0, 'clean setup')
end)

T.test('a missing kiln binary is a clear message, not a Lua error', function()
  kiln.setup({ cmd = '/nonexistent/kiln' })
  local from = T.mark()
  vim.cmd('Kiln verify')
  T.ok(T.note('not an executable', ERROR, from), 'told what is wrong')
  T.eq(state.verify, nil, 'no verify left pending')
  kiln.setup({ cmd = BIN, env = { KILN_SERVE_LISTEN = '127.0.0.1:0' }, log_level = 'debug' })
end)

T.test('cmd: a list is the whole command line (nvim-lspconfig habit), a string cmd gets args', function()
  local config = require('kiln.config')
  local exe = vim.fn.exepath(BIN)
  -- Each setup's command line first, then the usual setup back, so a failure here leaves the
  -- tests after this one a working configuration.
  local function command_for(opts)
    local problems = kiln.setup(opts)
    return config.command(), problems
  end
  local list, list_problems = command_for({ cmd = { BIN, 'mcp' } })
  local with_options = command_for({ cmd = { BIN, '--log-level', 'debug', 'mcp' } })
  local plain = command_for({ cmd = BIN })
  local with_args = command_for({ cmd = BIN, args = { 'mcp', '--workspace', WS } })
  local both, both_problems = command_for({ cmd = { BIN, 'mcp' }, args = { 'mcp' } })
  kiln.setup({ cmd = BIN, env = { KILN_SERVE_LISTEN = '127.0.0.1:0' }, log_level = 'debug' })
  T.eq(#list_problems, 0, 'a list cmd is fine')
  T.eq(list, { exe, 'mcp' }, 'kiln mcp, not kiln mcp mcp')
  T.eq(with_options, { exe, '--log-level', 'debug', 'mcp' }, 'options before mcp, in the list')
  T.eq(plain, { exe, 'mcp' }, 'a string cmd gets the default args')
  T.eq(with_args, { exe, 'mcp', '--workspace', WS }, 'a string cmd gets the given args')
  T.eq(#both_problems, 1, 'args beside a list cmd is reported: ' .. vim.inspect(both_problems))
  T.match(both_problems[1], 'args is not used when cmd is a list', 'says why')
  T.eq(both, { exe, 'mcp' }, 'and not appended')
  -- The list's command line really serves MCP.
  local s = start_session({ cmd = list, workspace = WS, open = false, roots = false }, 'a session from the list cmd')
  T.eq(s.server_info.name, 'kiln', 'serverInfo.name')
  stop_session(s, 'the list-cmd session')
end)

T.test('starts kiln mcp, initializes and opens the current folder as the workspace', function()
  local t0 = uv.hrtime()
  vim.cmd('Kiln status')
  T.ok((uv.hrtime() - t0) / 1e6 < 200, ':Kiln status returns at once')
  T.match(echoed[#echoed], '^Kiln: not started', ':Kiln status before the first command')
  local s = session()
  T.eq(s.state, 'running', 'state')
  T.ok(pid_alive(s.pid), 'server process is alive')
  T.eq(s.server_info.name, 'kiln', 'serverInfo.name')
  T.eq(vim.fn.resolve(s.root), WS, 'workspace root is the cwd')
  T.ok(vim.tbl_contains(kiln.check_names(), 'test'), 'kiln.json checks known: ' .. vim.inspect(kiln.check_names()))
  T.ok(vim.tbl_contains(vim.fn.getcompletion('Kiln verify ', 'cmdline'), 'load'), 'verify completes check names')
  T.ok(not vim.tbl_contains(vim.fn.getcompletion('Kiln verify load ', 'cmdline'), 'load'), 'a given check is not offered again')
  T.match(table.concat(kiln.status_lines(), '\n'), 'running, pid %d+', 'status')
end)

T.test('roots: the server opens the folder kiln.nvim offers in roots/list', function()
  -- A second session that declares roots but does not call workspace_open itself.
  local s = start_session({ cmd = { BIN, 'mcp' }, workspace = WS, open = false }, 'second session')
  local info
  T.wait(10000, function()
    if info and not info.err and info.value and info.value.root then
      return true
    end
    if not info or info.value then
      info = false
      s:call_tool('workspace_info', {}, {}, function(err, value)
        info = { err = err, value = value }
      end)
    end
  end, 'workspace_info after roots/list')
  T.eq(vim.fn.resolve(info.value.root), WS, 'root from roots/list')
  stop_session(s, 'second session')
end)

T.test('tools/list offers every tool kiln.nvim calls, with the arguments it passes', function()
  local s = session()
  local res
  s:request('tools/list', vim.empty_dict(), function(err, r)
    res = { err = err, r = r }
  end)
  T.wait(10000, function()
    return res
  end, 'tools/list')
  T.eq(res.err, nil, 'tools/list')
  local by = {}
  for _, t in ipairs(res.r.tools) do
    by[t.name] = t
  end
  local used = {
    workspace_open = { 'path' },
    sandbox_exec = { 'command', 'timeout_s' },
    verify = { 'checks' },
    trace_list = { 'kind', 'status', 'limit', 'cursor' },
    trace_get = { 'trace_id' },
    publish = { 'path', 'share', 'password', 'invite' },
    sandbox_list = {},
    sandbox_create = { 'services' },
    service_list = { 'sandbox_id' },
    service_restart = { 'sandbox_id', 'name' },
    checkpoint_list = { 'limit' },
    checkpoint_diff = { 'from', 'to', 'path', 'offset', 'limit' },
    checkpoint_restore = { 'checkpoint_id', 'dry_run' },
  }
  for name, args in pairs(used) do
    T.ok(by[name], 'server has ' .. name)
    T.ok(vim.tbl_contains(kiln.tools_used, name), 'tools_used lists ' .. name)
    for _, a in ipairs(args) do
      T.ok(by[name].inputSchema.properties[a], name .. ' takes ' .. a)
    end
  end
end)

-- :Kiln run ---------------------------------------------------------------------------------------
T.test(':Kiln run streams output into a scratch buffer and ends with the exit status', function()
  local t0 = uv.hrtime()
  vim.cmd('Kiln run echo hello; sleep 0.3; echo world >&2; exit 3')
  T.ok((uv.hrtime() - t0) / 1e6 < 200, ':Kiln run returns at once')
  local run = last_run()
  T.eq(vim.api.nvim_buf_get_name(run.buf), 'kiln://run/' .. run.n, 'buffer name')
  T.eq(vim.api.nvim_get_current_buf(), run.buf, 'the run buffer is shown')
  T.eq(vim.bo[run.buf].buftype, 'nofile', 'scratch')
  T.eq(vim.bo[run.buf].modifiable, false, 'read-only')
  T.wait(20000, function()
    return run_finished(run)
  end, 'the run to finish')
  local text = T.text(run.buf)
  T.match(text, '^%$ echo hello', 'header')
  T.match(text, '\nhello\n', 'stdout')
  T.match(text, '\nworld\n', 'stderr')
  T.match(text, '%[exit 3 · [%d%.]+m?s · trace tr_%w+%]$', 'footer')
  T.ok(run.chunks >= 1, 'output came as notifications/progress (' .. run.chunks .. ' chunks)')
  vim.cmd('close')
end)

T.test("a run whose streamed output missed a part shows the result's complete output", function()
  -- Progress is best effort; the result's tails are the record (synthetic result, real buffer).
  local ui = require('kiln.ui')
  local buf = ui.scratch('kiln://run/synthetic', 'kilnrun', {})
  ui.set_lines(buf, 0, -1, { '$ echo a; echo b >&2', 'a', '' })
  local run = { buf = buf, pending = '', done = 2, chunks = 1, streamed = 2 }
  require('kiln.run')._finish(run, { stdout = 'a\n', stderr = 'b\n', stdout_total_bytes = 2, stderr_total_bytes = 2,
    stdout_truncated = false, stderr_truncated = false, exit_code = 0, signal = vim.NIL, stop_reason = 'exit',
    duration_ms = 3.5, trace_id = 'tr_1' })
  T.eq(T.lines(buf), { '$ echo a; echo b >&2', 'a', 'b', '[exit 0 · 3ms · trace tr_1]' }, 'buffer')
  -- Complete streams are left as they came (interleaved as the command wrote them).
  ui.set_lines(buf, 0, -1, { '$ x', 'b', 'a', '' })
  run = { buf = buf, pending = '', done = 3, chunks = 2, streamed = 4 }
  require('kiln.run')._finish(run, { stdout = 'a\n', stderr = 'b\n', stdout_total_bytes = 2, stderr_total_bytes = 2,
    exit_code = 1, signal = vim.NIL, stop_reason = 'exit', duration_ms = 3, trace_id = 'tr_2' })
  T.eq(T.lines(buf), { '$ x', 'b', 'a', '[exit 1 · 3ms · trace tr_2]' }, 'kept')
  vim.cmd('bwipe ' .. buf)
end)

T.test(':Kiln stop cancels a running command; the server kills it (notifications/cancelled)', function()
  vim.cmd('Kiln run echo started; sleep 60; echo never')
  local run = last_run()
  T.wait(20000, function()
    return T.text(run.buf):find('started')
  end, 'the command to start')
  T.eq(kiln.statusline(), 'kiln: run', 'statusline while it runs')
  local from = T.mark()
  vim.cmd('Kiln stop')
  T.ok(T.note('cancelled 1 request', nil, from), 'told how many were cancelled')
  T.wait(2000, function()
    return run_finished(run)
  end, 'the run to end')
  T.match(T.text(run.buf), '%[cancelled%]$', 'footer says cancelled')
  T.eq(kiln.statusline(), '', 'statusline when idle')
  -- The server recorded the run as cancelled, and it is no longer running.
  T.wait(15000, function()
    local r = call('trace_list', { kind = 'exec', limit = 1 })
    local t = r.value and r.value.traces[1]
    return t and t.status ~= 'running' and t.stop_reason == 'cancelled'
  end, 'the trace to say cancelled')
  T.eq(state.session.state, 'running', 'session still running')
  T.ok(not table.concat(T.lines(run.buf), '\n', 2):find('never'), 'the command did not go on')
  vim.cmd('close')
end)

T.test('<C-c> in a run buffer cancels that run', function()
  vim.cmd('Kiln run echo waiting; sleep 60')
  local run = last_run()
  T.wait(20000, function()
    return T.text(run.buf):find('waiting')
  end, 'the command to start')
  T.eq(vim.api.nvim_get_current_buf(), run.buf, 'in the run buffer')
  local map = vim.fn.maparg('<C-c>', 'n', false, true)
  T.eq(map.buffer, 1, '<C-c> is mapped in the buffer')
  feed('<C-c>')
  T.wait(3000, function()
    return run_finished(run)
  end, 'the run to end')
  T.match(T.text(run.buf), '%[cancelled%]$', 'footer says cancelled')
  feed('q')
  T.ok(vim.fn.bufwinid(run.buf) == -1, 'q closes the window')
end)

-- :Kiln verify ------------------------------------------------------------------------------------
T.test(':Kiln verify puts the failing test in the quickfix list (file, line, message)', function()
  local progress = {}
  require('kiln.config').options.progress = function(msg)
    table.insert(progress, msg)
  end
  local win = vim.api.nvim_get_current_win()
  local from = T.mark()
  vim.cmd('Kiln verify')
  T.ok(state.verify ~= nil, 'verify in flight')
  wait_verify(from)
  T.ok(T.note('verify fail', WARN, from), 'told it failed')
  local qf = vim.fn.getqflist()
  T.ok(#qf >= 1, 'quickfix has entries')
  local e = qf[1]
  T.match(vim.api.nvim_buf_get_name(e.bufnr), '/test/case%.test%.js$', 'file')
  T.eq(vim.fn.resolve(vim.api.nvim_buf_get_name(e.bufnr)), WS .. '/test/case.test.js', 'absolute path in the workspace')
  T.eq(e.lnum, 10, 'line')
  T.eq(e.text, 'test: kebabCase: Expected values to be strictly equal:', 'check, test name and the first line')
  T.eq(e.type, 'E', 'type')
  T.eq(e.valid, 1, 'valid entry')
  -- The message's further lines follow as entries of their own, never squashed into one.
  -- node's diff: "+ actual - expected", a blank line, "+ 'hello-Big-World'", "- 'hello-big-world'", "^".
  T.eq({ qf[2].valid, qf[2].text, qf[2].bufnr }, { 0, '+ actual - expected', 0 }, 'the second line')
  T.eq({ qf[3].valid, qf[3].text }, { 0, '' }, 'the blank line')
  T.eq({ qf[4].valid, qf[4].text }, { 0, "+ 'hello-Big-World'" }, 'actual')
  T.eq({ qf[5].valid, qf[5].text }, { 0, "- 'hello-big-world'" }, 'expected')
  T.match(vim.fn.getqflist({ title = 1 }).title, '^Kiln verify fail', 'title')
  T.ok(vim.fn.getqflist({ winid = 1 }).winid ~= 0, 'quickfix window open')
  T.eq(vim.api.nvim_get_current_win(), win, 'focus stays where it was')
  T.ok(#progress >= 2, 'progress shown: ' .. vim.inspect(progress))
  T.match(table.concat(progress, '\n'), 'check test', 'per-check progress')
  require('kiln.config').options.progress = 'echo'
  -- :cc jumps to the failure like any quickfix list.
  vim.cmd('cc 1')
  T.eq(vim.fn.expand('%:t'), 'case.test.js', ':cc opens the file')
  T.eq(vim.fn.line('.'), 10, 'at the line')
  vim.cmd('b#')
end)

T.test(':Kiln verify CHECK runs only the named check', function()
  local from = T.mark()
  local res
  kiln.verify({ 'load' }, function(err, r)
    res = { err = err, r = r }
  end)
  T.wait(30000, function()
    return res
  end, 'verify load')
  T.eq(res.err, nil, 'no error')
  T.eq(#res.r.checks, 1, 'one check')
  T.eq(res.r.checks[1].name, 'load', 'the named one')
  T.eq(res.r.status, 'pass', 'passes')
  T.ok(T.note('verify pass', nil, from), 'told it passed')
  T.eq(#vim.fn.getqflist(), 0, 'quickfix list emptied')
  T.eq(vim.fn.getqflist({ winid = 1 }).winid, 0, 'quickfix window closed')
end)

T.test('a second :Kiln verify while one runs is refused politely', function()
  local from = T.mark()
  vim.cmd('Kiln verify load')
  vim.cmd('Kiln verify load')
  T.ok(T.note('already running', WARN, from), 'told it is running')
  wait_verify(from)
end)

T.test("verify after fixing the bug in a buffer ('autowrite' saves it) passes and clears the quickfix list", function()
  local path = WS .. '/src/case.js'
  local orig = vim.fn.readfile(path)
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
  local buf = vim.api.nvim_get_current_buf()
  local fixed = false
  for i, l in ipairs(T.lines(buf)) do
    if l:find("return words(text).join('-');", 1, true) then
      vim.api.nvim_buf_set_lines(buf, i - 1, i, false, { "  return words(text).map((w) => w.toLowerCase()).join('-');" })
      fixed = true
    end
  end
  T.ok(fixed, 'the deliberate bug is where the sample says')
  T.eq(vim.bo[buf].modified, true, 'buffer modified, not saved')
  local events = 0
  vim.api.nvim_create_autocmd('User', { pattern = 'KilnVerifyDone', once = true, callback = function()
    events = events + 1
  end })
  vim.o.autowrite = true
  local from = T.mark()
  vim.cmd('Kiln verify test')
  T.eq(vim.bo[buf].modified, false, "'autowrite' wrote the buffer before verify")
  wait_verify(from)
  vim.o.autowrite = false
  T.eq(#vim.fn.getqflist(), 0, 'no entries')
  T.match(vim.fn.getqflist({ title = 1 }).title, 'verify pass', 'title says pass')
  T.eq(events, 1, 'User KilnVerifyDone fired')
  T.eq(kiln.last_verify.status, 'pass', 'last_verify')
  vim.fn.writefile(orig, path) -- the bug back, for the tests after this one
  vim.cmd('edit! | bwipe')
end)

-- :Kiln traces ------------------------------------------------------------------------------------
T.test(':Kiln traces lists runs; <CR> opens a trace; a verify shows its steps, <CR> opens a step', function()
  vim.cmd('Kiln traces')
  local buf = find_buf('^kiln://traces$')
  T.ok(buf, 'traces buffer')
  T.wait(10000, function()
    return T.text(buf):find('tr_')
  end, 'rows')
  local lines = T.lines(buf)
  T.match(lines[1], '^Kiln traces', 'header')
  local row = line_matching(lines, '^fail%s+verify')
  T.ok(row, 'a failed verify is listed:\n' .. table.concat(lines, '\n'))
  T.ok(T.text(buf):find('\n%a+%s+exec%s'), 'exec rows too')
  vim.api.nvim_win_set_cursor(0, { row, 0 })
  local id = lines[row]:match('(tr_%w+)')
  feed('<CR>')
  T.wait(10000, function()
    return vim.api.nvim_buf_get_name(0) == 'kiln://trace/' .. id and T.text(0):find('steps')
  end, 'the verify trace')
  local detail = T.lines(0)
  T.match(detail[1], '^Trace ' .. id .. ' · verify · fail', 'detail header')
  local step
  for i, l in ipairs(detail) do
    if l:match('^%s+fail%s+exec') then
      step = i
    end
  end
  T.ok(step, 'a failed step:\n' .. table.concat(detail, '\n'))
  vim.api.nvim_win_set_cursor(0, { step, 0 })
  local step_id = detail[step]:match('(tr_%w+)')
  feed('<CR>')
  T.wait(10000, function()
    return vim.api.nvim_buf_get_name(0) == 'kiln://trace/' .. step_id and T.text(0):find('stdout')
  end, 'the step trace')
  local text = T.text(0)
  T.match(text, 'tests%s+%d+ passed, 1 failed', 'test counts')
  T.match(text, '✖ kebabCase  test/case%.test%.js:10', 'the failure')
  T.match(text, "\n      Expected values to be strictly equal:\n      %+ actual %- expected\n\n      %+ 'hello%-Big%-World'\n      %- 'hello%-big%-world'\n",
    'the message, line by line')
  -- <CR> on the failure's file:line opens the file there.
  local fl
  for i, l in ipairs(T.lines(0)) do
    if not fl and l:find('✖ kebabCase  ', 1, true) then
      fl = i
    end
  end
  vim.api.nvim_win_set_cursor(0, { fl, 0 })
  feed('<CR>')
  T.eq(vim.fn.expand('%:t'), 'case.test.js', 'file opened')
  T.eq(vim.fn.line('.'), 10, 'at the line')
  vim.cmd('only')
end)

T.test(':Kiln traces KIND STATUS filters; :Kiln traces ID opens one; a bad filter is a message', function()
  vim.cmd('Kiln traces verify pass')
  local buf = find_buf('^kiln://traces$')
  T.wait(10000, function()
    return T.text(buf):find('tr_') and not T.text(buf):find('loading')
  end, 'rows')
  for _, l in ipairs(T.lines(buf)) do
    if l:match('tr_%w+') then
      T.match(l, '^pass%s+verify', 'only passing verifies')
    end
  end
  local id = T.text(buf):match('(tr_%w+)')
  vim.cmd('Kiln traces ' .. id)
  T.wait(10000, function()
    return vim.api.nvim_buf_get_name(0) == 'kiln://trace/' .. id and T.text(0):find('^Trace')
  end, 'the trace')
  -- Paging: one trace per page, then <CR> on the "more" line appends the next page.
  require('kiln.config').options.traces_limit = 1
  vim.cmd('Kiln traces')
  buf = find_buf('^kiln://traces$')
  T.wait(10000, function()
    return T.text(buf):find('%-%- more')
  end, 'the more line')
  local rows = select(2, T.text(buf):gsub('tr_%w+', ''))
  T.eq(rows, 1, 'one row per page')
  vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(buf), 0 })
  feed('<CR>')
  T.wait(10000, function()
    return select(2, T.text(buf):gsub('tr_%w+', '')) == 2
  end, 'the second page')
  require('kiln.config').options.traces_limit = 50
  local from = T.mark()
  vim.cmd('Kiln traces sideways')
  T.ok(T.note('not a kind', ERROR, from), 'bad filter explained')
  vim.cmd('only')
end)

-- :Kiln publish -----------------------------------------------------------------------------------
-- A network allowlist (kiln.json sandbox.network) ---------------------------------------------
--- A local HTTP upstream (node): its port and the job to stop.
local function start_upstream()
  local port
  local job = vim.fn.jobstart({ 'node', '-e',
    "require('http').createServer((q, s) => s.end('upstream saw ' + q.url + '\\n')).listen(0, '127.0.0.1', function () { console.log(this.address().port) })" }, {
    on_stdout = function(_, data)
      port = port or tonumber((data[1] or ''):match('%d+'))
    end,
  })
  T.ok(job > 0, 'node started')
  T.wait(10000, function()
    return port
  end, 'the upstream to listen')
  return port, job
end

local function network_test()
  local port, job = start_upstream()
  local dir = TMP .. '/net-ws'
  vim.fn.mkdir(dir, 'p')
  vim.fn.writefile({ vim.json.encode({ sandbox = { network = { allow = { 'up.test:' .. port }, allow_private = true } } }) },
    dir .. '/kiln.json')
  local ok, err = pcall(function()
    open_workspace(dir, 'net%-ws')
    vim.cmd('Kiln run curl -s http://up.test:' .. port .. '/ok; curl -s -o /dev/null http://unlisted.test/; '
      .. 'curl -s -o /dev/null http://unlisted.test/again; curl -s -o /dev/null http://other.test:8080/')
    local run = last_run()
    T.wait(30000, function()
      return run_finished(run)
    end, 'the run to finish')
    local id = nn_id(run.result)
    local got = call('trace_get', { trace_id = id })
    T.eq(got.err, nil, 'trace_get')
    T.eq(#got.value.trace.network_log, 4, 'four entries in the real network log')
    -- The run buffer: the output, then the network log (refusals first, what to add), then the footer.
    local lines = T.lines(run.buf)
    local at = line_matching(lines, '^network: ')
    T.ok(at, 'a network line:\n' .. table.concat(lines, '\n'))
    T.match(lines[at - 1], '^upstream saw /ok$', 'after the output')
    T.match(lines[at], '^network: 1 allowed, 3 refused; %d+ B up, %d+ B down$', 'totals')
    T.eq(lines[at + 1], '  refused  unlisted.test:80  no allow entry matches (add "unlisted.test" to network.allow) (×2)', 'a repeated refusal is one line')
    T.eq(lines[at + 2], '  refused  other.test:8080  no allow entry matches (add "other.test:8080" to network.allow)', 'with the port to add')
    T.match(lines[at + 3], '^  allowed  up%.test:' .. port .. '  %d+ B up, %d+ B down$', 'the allowed upstream last')
    T.match(lines[at + 4], '^%[exit 0 · [%d%.]+m?s · trace ' .. id .. '%]$', 'then the footer')
    T.eq(#lines, at + 4, 'the footer is the last line')
    vim.cmd('close')

    -- The trace buffer says the same under "network", and the policy names the allowlist.
    vim.cmd('Kiln traces ' .. id)
    T.wait(10000, function()
      return vim.api.nvim_buf_get_name(0) == 'kiln://trace/' .. id and T.text(0):find('\nnetwork ')
    end, 'the trace')
    lines = T.lines(0)
    at = line_matching(lines, '^network ')
    T.match(lines[at], '^network%s+1 allowed, 3 refused; %d+ B up, %d+ B down$', 'trace totals')
    T.match(lines[at + 1], '^  refused  unlisted%.test:80  no allow entry matches %(add "unlisted%.test" to network%.allow%) %(×2%)$', 'trace refusal')
    T.match(lines[at + 2], '^  refused  other%.test:8080  ', 'second refusal')
    T.match(lines[at + 3], '^  allowed  up%.test:' .. port .. '  ', 'then allowed')
    T.match(T.text(0), '\npolicy%s+network allow up%.test:' .. port .. '; private allowed · isolation ', 'the allowlist in the policy line')
    vim.cmd('only')

    -- A long log: 20 lines, then how many more.
    vim.cmd('Kiln run for i in $(seq 1 25); do curl -s -o /dev/null http://h$i.test/; done')
    run = last_run()
    T.wait(30000, function()
      return run_finished(run)
    end, 'the long run to finish')
    lines = T.lines(run.buf)
    at = line_matching(lines, '^network: ')
    T.match(lines[at], '^network: 0 allowed, 25 refused; 0 B up, 0 B down$', 'long totals')
    for i = 1, 20 do
      T.eq(lines[at + i], string.format('  refused  h%d.test:80  no allow entry matches (add "h%d.test" to network.allow)', i, i), 'line ' .. i)
    end
    T.eq(lines[at + 21], '  … 5 more (the whole log: trace_get ' .. nn_id(run.result) .. ')', 'the cap')
    T.match(lines[at + 22], '^%[exit 0', 'then the footer')
    vim.cmd('close')
  end)
  vim.fn.jobstop(job)
  vim.cmd('only')
  open_workspace()
  T.eq(vim.fn.resolve(state.session.root), WS, 'back in the cwd')
  if not ok then
    error(err, 0)
  end
end

T.test(':Kiln run and the trace buffer show a network allowlist run\'s log: refusals first, what to add, capped', network_test)

-- :Kiln changes / checkpoints / restore ----------------------------------------------------------
T.test('undoing a unified diff: context, several hunks, added and deleted files, no newline at the end, misfits refused', function()
  local cp = require('kiln.checkpoints')
  T.eq(cp.reverse_apply('a\nb\nc\nD\ne\nf\ng\n', '--- a/x\n+++ b/x\n@@ -1,7 +1,7 @@\n a\n b\n c\n-d\n+D\n e\n f\n g\n'), 'a\nb\nc\nd\ne\nf\ng\n', 'one change')
  local before = '1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n'
  local after = '0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n12\n'
  T.eq(cp.reverse_apply(after, '--- a/x\n+++ b/x\n@@ -1,3 +1,4 @@\n+0\n 1\n 2\n 3\n@@ -9,4 +10,3 @@\n 9\n 10\n-11\n 12\n'), before, 'two hunks')
  T.eq(cp.reverse_apply('one\ntwo\n', '--- a/n\n+++ b/n\n@@ -0,0 +1,2 @@\n+one\n+two\n'), '', 'an added file')
  T.eq(cp.reverse_apply('', '--- a/n\n+++ b/n\n@@ -1,2 +0,0 @@\n-one\n-two\n'), 'one\ntwo\n', 'a deleted file')
  T.eq(cp.reverse_apply('a\nc', '--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n'), 'a\nb', 'no newline')
  T.eq(cp.reverse_apply('a\n', '--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+a\n'), 'a', 'a newline added')
  local r, err = cp.reverse_apply('a\nX\nc\n', '--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n')
  T.eq(r, nil, 'a misfit')
  T.match(err, 'does not fit', 'a misfit says so')
  r, err = cp.reverse_apply('a\nB\n', '--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n')
  T.match(err, 'cut short', 'a truncated diff')
end)

local function wait_buf(name, pat, what)
  local buf
  T.wait(20000, function()
    buf = find_buf(name)
    return buf and buf == vim.api.nvim_get_current_buf() and T.text(buf):find(pat)
  end, what)
  return buf
end

-- The two windows of the diff split in the current tab page: left (before) and right.
local function diff_windows(what)
  local wins
  T.wait(20000, function()
    wins = vim.api.nvim_tabpage_list_wins(0)
    return #wins == 2 and vim.wo[wins[1]].diff and vim.wo[wins[2]].diff
  end, what)
  return vim.api.nvim_win_get_buf(wins[1]), vim.api.nvim_win_get_buf(wins[2])
end

local function close_tab()
  vim.cmd('diffoff!')
  vim.cmd('silent! tabonly!')
  vim.cmd('silent! only!')
  vim.cmd('enew')
end

T.test(':Kiln changes lists what a run changed; <CR> opens a vertical diff split of before and after; :Kiln checkpoints, :Kiln restore undo it', function()
  local case, readme = WS .. '/src/case.js', WS .. '/README.md'
  local orig_case, orig_readme = vim.fn.readfile(case), vim.fn.readfile(readme)
  local run = kiln.run([[sed -i 's/join(.-.)/join("_")/' src/case.js && printf 'line one\nline two\n' > notes.txt && rm README.md]])
  T.wait(30000, function()
    return run_finished(run)
  end, 'the run')
  local l = T.lines(run.buf)
  T.match(l[#l], '^%[exit 0 · [%d%.]+m?s · trace tr_%w+ · 3 changed%]$', 'the footer counts the changes')
  T.match(l[#l - 1], '^changed: 3 files %(1 added, 1 modified, 1 deleted%): D README%.md, A notes%.txt, M src/case%.js · :Kiln changes tr_%w+$', 'and names them')
  local id = nn_id(state.last_run)
  local after_case = vim.fn.readfile(case)
  T.ok(not vim.deep_equal(after_case, orig_case), 'the run changed src/case.js')
  vim.cmd('close')

  -- :Kiln changes ID: the files, with what happened to each.
  vim.cmd('Kiln changes ' .. id)
  local buf = wait_buf('^kiln://changes/' .. id .. '$', '3 changed', 'the changes buffer')
  local lines = T.lines(buf)
  T.match(lines[1], '^Kiln changes of ' .. id .. ' %(sed ', 'title')
  T.match(lines[2], '^D  README%.md +1%.4 KiB$', 'deleted')
  T.match(lines[3], '^A  notes%.txt +18 B$', 'added')
  T.match(lines[4], '^M  src/case%.js +647 B → 647 B$', 'modified')
  T.eq(vim.bo[buf].modifiable, false, 'read-only')

  -- <CR> on src/case.js: a new tab page, the file before the run on the left, the file itself on the right.
  vim.api.nvim_win_set_cursor(0, { 4, 0 })
  feed('<CR>')
  local left, right = diff_windows('the diff split')
  T.eq(vim.fn.tabpagenr('$'), 2, 'a tab page of its own')
  T.match(vim.api.nvim_buf_get_name(left), '^kiln://checkpoint/cp_%w+/src/case%.js$', 'left: the checkpoint before')
  T.eq(T.lines(left), orig_case, 'left: the text before the run')
  T.eq(vim.bo[left].modifiable, false, 'left is read-only')
  T.eq(vim.bo[left].filetype, 'javascript', 'left has the filetype of the file')
  T.eq(vim.api.nvim_buf_get_name(right), case, 'right: the file itself')
  T.eq(T.lines(right), after_case, 'right: the text after the run')
  T.ok(vim.fn.winwidth(vim.fn.win_getid(1)) < vim.o.columns, 'side by side (vertical)')
  close_tab()

  -- Edited since: the right side is the run's version, read-only.
  vim.fn.writefile(vim.list_extend({ '// edited later' }, vim.deepcopy(after_case)), case)
  vim.cmd('checktime')
  vim.cmd('Kiln changes ' .. id)
  wait_buf('^kiln://changes/' .. id .. '$', '3 changed', 'the changes buffer again')
  vim.api.nvim_win_set_cursor(0, { 4, 0 })
  feed('<CR>')
  left, right = diff_windows('the diff split of an edited file')
  T.eq(T.lines(left), orig_case, 'left: before')
  T.match(vim.api.nvim_buf_get_name(right), '^kiln://checkpoint/cp_%w+/src/case%.js$', 'right: the checkpoint after')
  T.eq(T.lines(right), after_case, 'right: the text the run left')
  close_tab()

  -- A deleted file: its text on the left, an empty buffer on the right.
  vim.cmd('Kiln changes ' .. id)
  wait_buf('^kiln://changes/' .. id .. '$', '3 changed', 'the changes buffer')
  vim.api.nvim_win_set_cursor(0, { 2, 0 })
  feed('<CR>')
  left, right = diff_windows('the diff split of a deleted file')
  T.eq(T.lines(left), orig_readme, 'README before')
  T.eq(T.lines(right), { '' }, 'nothing after')
  close_tab()

  -- The trace buffer lists them too; <CR> on one opens its diff.
  vim.cmd('Kiln traces ' .. id)
  local tbuf = wait_buf('^kiln://trace/' .. id .. '$', 'changed', 'the trace')
  local tl = T.lines(tbuf)
  local at = line_matching(tl, '^changed +3 files %(1 added, 1 modified, 1 deleted%)')
  T.ok(at, 'the trace says what changed: ' .. table.concat(tl, '\n'))
  T.eq({ tl[at + 1], tl[at + 2], tl[at + 3] }, { '  D README.md', '  A notes.txt', '  M src/case.js' }, 'the paths')
  vim.api.nvim_win_set_cursor(0, { at + 3, 0 })
  feed('<CR>')
  left, right = diff_windows('the diff split from the trace')
  T.eq(T.lines(left), orig_case, 'from the trace: before')
  close_tab()

  -- :Kiln checkpoints: newest first, the run's before and after.
  vim.cmd('Kiln checkpoints')
  local cbuf = wait_buf('^kiln://checkpoints$', 'before ' .. id, 'the checkpoints')
  local cl = T.lines(cbuf)
  local before_line = line_matching(cl, 'before ' .. id)
  T.ok(line_matching(cl, 'after ' .. id) < before_line, 'newest first')
  local before_cp = cl[before_line]:match('^(cp_%w+) +exec ')
  T.ok(before_cp, 'a row: ' .. cl[before_line])

  -- :Kiln restore ID: a confirmation listing the dry run; declined, nothing changes.
  local asked = {}
  local orig_confirm = vim.fn.confirm
  local answer = 2
  vim.fn.confirm = function(msg, choices)
    asked[#asked + 1] = { msg = msg, choices = choices }
    return answer
  end
  local ok, err = pcall(function()
    local from = T.mark()
    vim.cmd('Kiln restore ' .. before_cp)
    T.wait(20000, function()
      return T.note('cancelled', nil, from)
    end, 'the cancelled restore')
    T.match(asked[1].msg, '^Kiln: restore checkpoint ' .. before_cp .. '%? Files: 2 restored %(README%.md, src/case%.js%); 1 deleted %(notes%.txt%)', 'the question')
    T.eq(asked[1].choices, '&Restore\n&Cancel', 'the choices')
    T.eq(vim.fn.filereadable(WS .. '/notes.txt'), 1, 'declined: nothing restored')

    -- Confirmed (R in the checkpoints buffer): the files as before the run, and the undo id.
    answer = 1
    from = T.mark()
    vim.api.nvim_set_current_buf(cbuf)
    vim.api.nvim_win_set_cursor(0, { before_line, 0 })
    feed('R')
    T.wait(20000, function()
      return T.note('restored ' .. before_cp, nil, from)
    end, 'the restore')
    local n = T.note('restored ' .. before_cp, nil, from)
    T.match(n.msg, 'restored ' .. before_cp .. ': 2 files restored, 1 deleted; undo: :Kiln restore cp_%w+$', 'the message')
    T.eq(vim.fn.readfile(case), orig_case, 'src/case.js back')
    T.eq(vim.fn.readfile(readme), orig_readme, 'README.md back')
    T.eq(vim.fn.filereadable(WS .. '/notes.txt'), 0, 'notes.txt gone')
    local undo = n.msg:match('(cp_%w+)$')

    -- The undo checkpoint brings the edit back; restoring the same state again has nothing to do.
    from = T.mark()
    vim.cmd('Kiln restore ' .. undo)
    T.wait(20000, function()
      return T.note('restored ' .. undo, nil, from)
    end, 'the undo')
    T.eq(vim.fn.readfile(case)[1], '// edited later', 'the edit is back')
    from = T.mark()
    vim.cmd('Kiln restore ' .. undo)
    T.wait(20000, function()
      return T.note('nothing to restore', nil, from)
    end, 'nothing to restore')
    -- Back to the sample as it was, for the tests after this one.
    from = T.mark()
    vim.cmd('Kiln restore ' .. before_cp)
    T.wait(20000, function()
      return T.note('restored ' .. before_cp, nil, from)
    end, 'the restore again')
  end)
  vim.fn.confirm = orig_confirm
  close_tab()
  T.ok(ok, tostring(err))
  T.eq(vim.fn.readfile(case), orig_case, 'the sample as it was')
  T.eq(vim.fn.filereadable(WS .. '/notes.txt'), 0, 'no notes.txt')

  -- Mistakes are messages.
  local from = T.mark()
  vim.cmd('Kiln restore')
  T.ok(T.note('restore needs a checkpoint id', ERROR, from), 'no id')
  vim.cmd('Kiln restore cp_nope')
  T.wait(10000, function()
    return T.note('no checkpoint cp_nope', ERROR, from)
  end, 'an unknown checkpoint')
end)

T.test(':Kiln publish PATH publishes, copies the URL to registers, and kiln serve answers it', function()
  vim.fn.mkdir(WS .. '/site', 'p')
  vim.fn.writefile({ '<h1>published from neovim</h1>' }, WS .. '/site/index.html')
  vim.fn.setreg('"', 'before')
  local from = T.mark()
  vim.cmd('Kiln publish site public site')
  T.wait(20000, function()
    return T.note('published', nil, from) or T.note('publish:', ERROR, from)
  end, 'publish')
  local note = T.note('published', nil, from)
  T.ok(note, 'published: ' .. vim.inspect(T.notes[#T.notes]))
  local url = vim.fn.getreg('"')
  T.match(url, '^http://127%.0%.0%.1:%d+/a/site/$', 'URL in the unnamed register')
  T.ok(note.msg:find(url, 1, true), 'URL in the message')
  if vim.fn.has('clipboard') == 1 then
    T.eq(vim.fn.getreg('+'), url, 'URL in +')
  end
  local status, body = http_get(url)
  T.eq(status, 200, 'HTTP status')
  T.match(body, 'published from neovim', 'kiln serve serves it')
  local from2 = T.mark()
  vim.cmd('Kiln publish site Sideways')
  T.ok(T.note('neither a share mode', ERROR, from2), 'bad share mode explained')
end)

T.test(':Kiln publish PATH password asks for the password, and the URL needs it', function()
  vim.fn.mkdir(WS .. '/private', 'p')
  vim.fn.writefile({ 'for your eyes only' }, WS .. '/private/index.html')
  local asked = 0
  local orig = vim.fn.inputsecret
  vim.fn.inputsecret = function()
    asked = asked + 1
    return 's3cret-pw'
  end
  local ok, err = pcall(function()
    local res
    kiln.publish('private', 'password', function(e, r)
      res = { err = e, r = r }
    end, { name = 'private' })
    T.wait(20000, function()
      return res
    end, 'publish')
    T.eq(res.err, nil, 'published')
    T.eq(asked, 1, 'asked once')
    T.eq(res.r.share, 'password', 'password share')
    local url = res.r.url
    local code = http_get(url)
    T.eq(code, 401, 'refused without the password')
    local ok_code, body = http_get(url, 'anyone', 's3cret-pw')
    T.eq(ok_code, 200, 'status with the password')
    T.match(body, 'for your eyes only', 'served with it')
    T.ok(not table.concat(vim.tbl_map(function(n)
      return n.msg
    end, T.notes), '\n'):find('s3cret', 1, true), 'the password never appears in a message')
    -- kiln.json's publish section may make a share a password one: the server says so and the
    -- plugin asks (servers without kiln.json publish defaults just publish).
    vim.fn.mkdir(WS .. '/reports', 'p')
    vim.fn.writefile({ 'report' }, WS .. '/reports/index.html')
    asked = 0
    res = nil
    kiln.publish('reports', nil, function(e, r)
      res = { err = e, r = r }
    end)
    T.wait(20000, function()
      return res
    end, 'publish reports')
    T.eq(res.err, nil, 'published reports')
    T.eq(asked, res.r.share == 'password' and 1 or 0, 'asked only for a password share')
  end)
  vim.fn.inputsecret = orig
  assert(ok, err)
end)

T.test("without arguments, :Kiln run and :Kiln publish ask (publish offers kiln.json's publish.path)", function()
  local asked = {}
  local orig = vim.ui.input
  vim.ui.input = function(opts, on_confirm)
    table.insert(asked, opts)
    on_confirm(nil) -- the user pressed <Esc>
  end
  local seq = state.run_seq
  local ok, err = pcall(function()
    vim.cmd('Kiln run')
    T.eq(#asked, 1, 'asked for a command')
    T.match(asked[1].prompt, 'Kiln run', 'prompt')
    T.eq(state.run_seq, seq, '<Esc> runs nothing')
    vim.cmd('Kiln publish')
    T.eq(#asked, 2, 'asked for a path')
    T.eq(asked[2].default, 'reports', "kiln.json's publish.path offered")
  end)
  vim.ui.input = orig
  assert(ok, err)
end)

-- :Kiln open --------------------------------------------------------------------------------------
T.test(':Kiln open PATH switches the workspace; a missing folder is a message, not a Lua error', function()
  local other = TMP .. '/other-ws'
  vim.fn.mkdir(other, 'p')
  local from = T.mark()
  vim.cmd('Kiln open ' .. vim.fn.fnameescape(other))
  T.wait(10000, function()
    return T.note('workspace other%-ws', nil, from)
  end, 'open')
  T.eq(vim.fn.resolve(state.session.root), vim.fn.resolve(other), 'root switched')
  T.eq(#kiln.check_names(), 0, 'no kiln.json there')
  local r = call('trace_list', {})
  T.eq(#r.value.traces, 0, 'its own (empty) trace list')
  from = T.mark()
  vim.cmd('Kiln open /nonexistent/folder')
  T.wait(10000, function()
    return T.note('workspace_open: .*does not exist', ERROR, from)
  end, 'the error')
  T.eq(state.session.state, 'running', 'session still running')
  from = T.mark()
  vim.cmd('Kiln open')
  T.wait(10000, function()
    return T.note('workspace ', nil, from)
  end, 'open cwd')
  T.eq(vim.fn.resolve(state.session.root), WS, 'back in the cwd')
end)

-- :Kiln services ----------------------------------------------------------------------------------
local function services_test()
  local dir = TMP .. '/svc-ws'
  vim.fn.mkdir(dir, 'p')
  vim.fn.writefile({ vim.json.encode({ services = { api = { run = 'node server.js', port = 3000, ready = '/health' } } }) },
    dir .. '/kiln.json')
  vim.fn.writefile({ "require('http').createServer((q, s) => s.end('ok')).listen(3000, '127.0.0.1', () => console.log('api listening on 3000'));" },
    dir .. '/server.js')
  open_workspace(dir, 'svc%-ws')

  vim.cmd('KilnServices')
  local buf = vim.api.nvim_get_current_buf()
  T.eq(vim.api.nvim_buf_get_name(buf), 'kiln://services', 'services buffer')
  T.wait(10000, function()
    return T.text(buf):find('no sandbox runs services')
  end, 'the empty list')
  T.match(T.lines(buf)[1], '^Kiln services of svc%-ws · <CR> log · R restart', 'header')
  T.match(T.text(buf), 's starts those kiln%.json declares: api %(command%)', 'what s would start')

  local from = T.mark()
  feed('s')
  T.wait(60000, function()
    return T.text(buf):find('\nready%s+api%s')
  end, 'the started service listed')
  T.ok(T.note('services started in sb_%w+: api http://127%.0%.0%.1:3000', nil, from), 'started message')
  local lines = T.lines(buf)
  T.match(lines[2], '^STATE%s+NAME%s+KIND%s+SANDBOX%s+URL$', 'columns')
  local row = line_matching(lines, '^ready%s+api%s')
  T.match(lines[row], '^ready%s+api%s+command%s+sb_%w+%s+http://127%.0%.0%.1:3000$', 'name, kind, sandbox, url')
  local sandbox = lines[row]:match('(sb_%w+)')
  -- Both Kiln commands list the same thing.
  T.eq(vim.fn.exists(':KilnServices'), 2, ':KilnServices exists')
  T.ok(vim.tbl_contains(vim.fn.getcompletion('Kiln se', 'cmdline'), 'services'), ':Kiln services completes')

  vim.api.nvim_win_set_cursor(0, { 1, 0 })
  from = T.mark()
  feed('R')
  T.ok(T.note('no service on this line', nil, from), 'R on the header restarts nothing')
  vim.api.nvim_win_set_cursor(0, { row, 0 })
  from = T.mark()
  feed('R')
  T.wait(60000, function()
    return T.note('api restarted', nil, from) or T.note('service_restart: ', ERROR, from)
  end, 'the restart')
  T.ok(T.note('api restarted: ready at http://127%.0%.0%.1:3000', nil, from), 'restarted: ' .. vim.inspect(T.notes[#T.notes]))
  local listed = call('service_list', { sandbox_id = sandbox })
  T.eq(listed.err, nil, 'service_list')
  T.eq(listed.value.services[1].restarts, 1, 'restarted once')

  T.wait(10000, function()
    for _, e in pairs(state.views[buf].rows) do
      if e.service.restarts == 1 then
        return true
      end
    end
  end, 'the list reloaded')
  row = line_matching(T.lines(buf), '^ready%s+api%s')
  vim.api.nvim_set_current_win(vim.fn.bufwinid(buf))
  vim.api.nvim_win_set_cursor(0, { row, 0 })
  feed('<CR>')
  T.wait(10000, function()
    return vim.api.nvim_buf_get_name(0) == 'kiln://service/' .. sandbox .. '/api' and T.text(0):find('api listening on 3000')
  end, 'the log of the service')
  T.match(T.lines(0)[1], '^Service api %(command, ready%) · trace tr_%w+', 'log header')
  vim.cmd('only')

  -- The service's trace is listed under the kind service.
  local r = call('trace_list', { kind = 'service' })
  T.ok(#r.value.traces >= 1, 'service traces')
  T.ok(vim.tbl_contains(vim.fn.getcompletion('Kiln traces s', 'cmdline'), 'service'), ':Kiln traces completes service')
end

T.test(':Kiln services: offers kiln.json services, s starts them, R restarts the one under the cursor, <CR> its log', function()
  local ok, err = pcall(services_test)
  -- Back to the sample project even after a failure, so the tests after this one still run there.
  vim.cmd('only')
  open_workspace()
  T.eq(vim.fn.resolve(state.session.root), WS, 'back in the cwd')
  if not ok then
    error(err, 0)
  end
end)

-- :Kiln log ---------------------------------------------------------------------------------------
T.test(':Kiln log shows the server stderr and its notifications/message, and follows new lines', function()
  vim.cmd('Kiln log')
  local buf = vim.api.nvim_get_current_buf()
  T.eq(vim.api.nvim_buf_get_name(buf), 'kiln://log', 'log buffer')
  local text = T.text(buf)
  T.match(text, 'stderr%s+info%s+.*session initialized by kiln%.nvim', 'stderr line')
  T.match(text, 'server%s+debug%s+%[kiln%].*cancelled by the client', 'a notifications/message line')
  local n = vim.api.nvim_buf_line_count(buf)
  vim.cmd('Kiln open /nonexistent/again')
  T.wait(10000, function()
    return vim.api.nvim_buf_line_count(buf) > n
  end, 'new log lines')
  vim.cmd('only')
end)

-- Lifecycle ---------------------------------------------------------------------------------------
T.test(':Kiln restart stops the server and starts a new one on the same workspace', function()
  local old = session()
  local old_pid = old.pid
  vim.cmd('Kiln restart')
  T.wait(20000, function()
    return state.session and state.session ~= old and state.session.state == 'running'
  end, 'the new session')
  T.ok(state.session.pid ~= old_pid, 'new pid')
  T.wait(5000, function()
    return not pid_alive(old_pid)
  end, 'the old server to exit')
  T.eq(old.state, 'stopped', 'old session stopped cleanly')
  T.eq(vim.fn.resolve(state.session.root), WS, 'same workspace')
end)

T.test('a server that dies is reported, and the next command starts a new one', function()
  local s = session()
  local from = T.mark()
  uv.kill(s.pid, 'sigkill')
  T.wait(5000, function()
    return T.note('the server exited', WARN, from)
  end, 'the warning')
  T.eq(s.state, 'exited', 'state')
  local r = call('trace_list', { limit = 1 })
  T.eq(r.err, nil, 'works again')
  T.ok(state.session ~= s and pid_alive(state.session.pid), 'a new server')
end)

T.test('the UI never waits on the server: commands return before it has even started', function()
  kiln.shutdown()
  local t0 = uv.hrtime()
  vim.cmd('Kiln traces')
  local ms = (uv.hrtime() - t0) / 1e6
  T.ok(ms < 100, ':Kiln traces returned after ' .. ms .. ' ms')
  T.ok(state.session and state.session.state == 'starting', 'the server was still starting')
  local buf = find_buf('^kiln://traces$')
  T.wait(20000, function()
    return T.text(buf):find('tr_')
  end, 'rows')
  vim.cmd('only')
end)

T.test('JSON null and empty objects: {} stays an object, null never crashes a view', function()
  local r = call('trace_list', {}) -- arguments {} (an empty Lua table would encode as [])
  T.eq(r.err, nil, 'empty arguments accepted')
  local items = kiln.qf_items({
    checks = {
      { name = 'a', status = 'pass', tests = vim.NIL, trace_id = 'tr_1' },
      { name = 'b', status = 'error', exit_code = vim.NIL, stop_reason = vim.NIL, tests = vim.NIL, trace_id = vim.NIL, error = 'no report' },
      { name = 'c', status = 'fail', tests = { failures = { { name = 'x', message = 'm', file = 'f.js', line = vim.NIL } } } },
    },
  }, '/w')
  T.eq(#items, 2, 'two items')
  T.match(items[1].text, 'check b error: no report', 'error check')
  T.eq(items[2].filename, '/w/f.js', 'file')
  T.eq(items[2].lnum, 0, 'null line')
  -- A message of several lines (CRLF too): the first with the location, the rest as valid = 0.
  items = kiln.qf_items({
    checks = {
      { name = 't', status = 'fail', tests = { failures = { { name = 'eq', file = 'a.js', line = 3,
        message = "strictly equal:\r\n+ actual - expected\n\n+ 'a'\n- 'b'  \n    ^\n" } } } },
      { name = 'u', status = 'error', trace_id = 'tr_2', error = 'cannot start\nno such file' },
    },
  }, '/w')
  T.eq(vim.tbl_map(function(i)
    return { i.text, i.valid, i.filename, i.lnum }
  end, items), {
    { 't: eq: strictly equal:', nil, '/w/a.js', 3 },
    { '+ actual - expected', 0 },
    { '', 0 },
    { "+ 'a'", 0 },
    { "- 'b'", 0 },
    { '    ^', 0 },
    { 'check u error: cannot start (trace tr_2)', nil },
    { 'no such file', 0 },
  }, 'one entry per line')
  -- The line splitter copes with messages split across reads and several in one read.
  local got = {}
  local feedl = require('kiln.rpc')._line_splitter(function(l)
    got[#got + 1] = l
  end)
  feedl('{"a":')
  feedl('1}\n{"b":2}\r\n{"c"')
  feedl(':3}\n')
  T.eq(got, { '{"a":1}', '{"b":2}', '{"c":3}' }, 'lines')
  -- A big response (a 200 KiB file_read, twice over: text content and structuredContent) arrives
  -- in many reads and still decodes.
  local line = string.rep('0123456789abcdef', 4) -- 64 bytes
  local lines = {}
  for i = 1, 3200 do
    lines[i] = line
  end
  vim.fn.writefile(lines, WS .. '/big.txt')
  local big = call('file_read', { path = 'big.txt', limit = 4000 })
  T.eq(big.err, nil, 'file_read')
  T.eq(#big.value.content, 3200 * 65, 'whole content')
  os.remove(WS .. '/big.txt')
end)

-- Health and help ---------------------------------------------------------------------------------
T.test(':checkhealth kiln finds the server, completes a handshake and reports no errors', function()
  vim.cmd('silent checkhealth kiln')
  local text = T.text(0)
  T.match(text, 'MCP handshake: kiln', 'handshake')
  T.match(text, 'offers the %d+ tools the plugin uses', 'tools')
  T.match(text, 'setup options are valid', 'options')
  T.ok(not text:find('ERROR'), 'no errors:\n' .. text)
  vim.cmd('bwipe!')
end)

T.test('doc/kiln.txt: helptags build, and :help finds the commands and options', function()
  local rt = TMP .. '/doc-rtp'
  vim.fn.mkdir(rt .. '/doc', 'p')
  local src = vim.api.nvim_get_runtime_file('doc/kiln.txt', false)[1]
  T.ok(src, 'doc/kiln.txt on the runtimepath')
  vim.fn.writefile(vim.fn.readfile(src), rt .. '/doc/kiln.txt')
  vim.cmd('helptags ' .. vim.fn.fnameescape(rt .. '/doc'))
  vim.opt.rtp:prepend(rt)
  for _, tag in ipairs({ 'kiln', 'kiln-setup', ':Kiln', ':Kiln-open', ':Kiln-run', ':Kiln-verify', ':Kiln-traces', ':Kiln-changes', ':Kiln-checkpoints', ':Kiln-restore', ':Kiln-services',
    ':KilnServices', ':Kiln-publish', ':Kiln-log', ':Kiln-restart', ':Kiln-stop', ':Kiln-status', 'kiln-health', 'kiln-api' }) do
    local ok, err = pcall(vim.cmd, 'help ' .. tag)
    T.ok(ok, ':help ' .. tag .. ': ' .. tostring(err))
    T.eq(vim.fn.expand('%:t'), 'kiln.txt', ':help ' .. tag .. ' opens kiln.txt')
  end
  -- Every option in the defaults is documented.
  local doc = table.concat(vim.fn.readfile(src), '\n')
  for k in pairs(require('kiln.config').defaults) do
    T.ok(doc:find(k .. ' =', 1, true) or doc:find('*kiln-option-' .. k .. '*', 1, true), 'option ' .. k .. ' documented')
  end
  vim.cmd('helpclose')
end)

local function teardown()
  kiln.shutdown()
  -- Stop the kiln serve that publish started for this state directory.
  local f = io.open(KILN_HOME .. '/serve.json')
  if f then
    local ok, info = pcall(vim.json.decode, f:read('*a'))
    f:close()
    if ok and type(info) == 'table' and type(info.pid) == 'number' then
      uv.kill(info.pid, 'sigterm')
    end
  end
end

local v = vim.version()
T.main(string.format('nvim %d.%d.%d', v.major, v.minor, v.patch), teardown)
