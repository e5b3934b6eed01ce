-- What every :Kiln command shares: the options, the one MCP session (started on first use), the
-- log across sessions, progress display and small helpers. The commands live in their own files.
local config = require('kiln.config')
local mcp = require('kiln.mcp')
local ui = require('kiln.ui')

local nn = mcp.nn
local levels = vim.log.levels

local M = {}

M.subcommands = { 'open', 'run', 'verify', 'traces', 'changes', 'checkpoints', 'restore', 'services', 'publish', 'log', 'restart', 'stop',
  'status' }
M.trace_kinds = { 'exec', 'verify', 'publish', 'service', 'app', 'schedule' }
M.trace_statuses = { 'running', 'pass', 'fail', 'error', 'interrupted' }
M.share_modes = { 'public', 'password', 'invite' }
-- The tools this plugin calls; :checkhealth checks the server offers them.
M.tools_used = { 'workspace_open', 'sandbox_exec', 'verify', 'trace_list', 'trace_get', 'publish', 'sandbox_list',
  'sandbox_create', 'service_list', 'service_restart', 'checkpoint_list', 'checkpoint_diff', 'checkpoint_restore' }

M.state = {
  session = nil, -- the current mcp session
  workspace = nil, -- the folder last opened (kept across :Kiln restart)
  log = {}, -- log entries across sessions, for :Kiln log
  log_buf = nil,
  run_seq = 0,
  runs = {}, -- n -> run
  verify = nil, -- the in-flight verify handle
  views = {}, -- traces buffer -> {filter, next_cursor}; services buffer -> {rows}
  last_verify = nil,
  last_run = nil,
}
local state = M.state

function M.done(cb, ...)
  if cb then
    cb(...)
  end
end

local function strip_slash(p)
  if #p > 1 then
    p = p:gsub('/+$', '')
  end
  return p
end

function M.abspath(p)
  return strip_slash(vim.fn.fnamemodify(vim.fn.expand(p), ':p'))
end

function M.words(s)
  local out = {}
  for w in (s or ''):gmatch('%S+') do
    out[#out + 1] = w
  end
  return out
end

-- Log ------------------------------------------------------------------------------------------

function M.log_line(e)
  return string.format('%s %-6s %-7s %s', os.date('%H:%M:%S', e.time), e.source, e.level, e.text)
end

local function on_log(entry)
  table.insert(state.log, entry)
  if #state.log > mcp.LOG_MAX then
    table.remove(state.log, 1)
  end
  local buf = state.log_buf
  if buf and vim.api.nvim_buf_is_valid(buf) then
    local at_end = vim.api.nvim_get_current_buf() == buf
      and vim.api.nvim_win_get_cursor(0)[1] == vim.api.nvim_buf_line_count(buf)
    -- The first entry replaces the "nothing logged yet" line.
    ui.set_lines(buf, #state.log == 1 and 0 or -1, -1, { M.log_line(entry) })
    ui.follow(buf, at_end)
  end
end

-- Session --------------------------------------------------------------------------------------

local function on_exit(session, code, signal, expected)
  if session ~= state.session or expected then
    return
  end
  ui.notify(
    string.format('the server exited (code %s, signal %s); :Kiln log shows why, the next command starts it again', code, signal),
    levels.WARN
  )
end

--- The running session, started when needed; cb(err, session).
function M.session(cb)
  local s = state.session
  if s and (s.state == 'running' or s.state == 'starting') then
    return s:start(function(err)
      M.done(cb, err, not err and s or nil)
    end)
  end
  local cmd, err = config.command()
  if not cmd then
    ui.notify(err, levels.ERROR)
    return M.done(cb, err)
  end
  local o = config.options
  s = mcp.new({
    cmd = cmd,
    env = o.env,
    workspace = state.workspace or (o.workspace and M.abspath(o.workspace)) or vim.fn.getcwd(),
    log_level = o.log_level ~= false and o.log_level or nil,
    init_timeout_ms = o.init_timeout_ms,
    on_log = on_log,
    on_exit = on_exit,
  })
  state.session = s
  s:start(function(serr)
    if serr then
      ui.notify(serr, levels.ERROR)
      return M.done(cb, serr)
    end
    if s.workspace_error then
      ui.notify('workspace_open: ' .. s.workspace_error, levels.ERROR)
    elseif s.root then
      state.workspace = s.root
    end
    M.done(cb, nil, s)
  end)
end

-- Progress for verify: 'echo', 'notify', false or a function.
function M.show_progress(what, params)
  local p = config.options.progress
  if not p then
    return
  end
  local msg = nn(params.message) or ''
  local total = nn(params.total)
  local text = 'Kiln ' .. what .. (msg ~= '' and (': ' .. msg) or '')
  if total and msg == '' then
    text = string.format('%s %s/%s', text, nn(params.progress) or '?', total)
  end
  if type(p) == 'function' then
    p(text, params)
  elseif p == 'notify' then
    vim.notify(text, levels.INFO, { title = 'Kiln' })
  else
    ui.echo(text, 'MoreMsg')
  end
end

--- Calls any Kiln tool; cb(err, value, info). For scripts and mappings: the commands below are
--- built the same way.
function M.call(tool, args, cb, opts)
  M.session(function(err, s)
    if err then
      return M.done(cb, err)
    end
    s:call_tool(tool, args, opts or {}, function(terr, value, info)
      M.done(cb, terr, value, info)
    end)
  end)
end

-- Like :make, honour 'autowrite': the server reads files from disk.
function M.autowrite()
  if vim.o.autowrite or vim.o.autowriteall then
    pcall(vim.cmd, 'silent! wall')
  end
end

function M.fire(pattern)
  pcall(vim.api.nvim_exec_autocmds, 'User', { pattern = pattern, modeline = false })
end

return M
