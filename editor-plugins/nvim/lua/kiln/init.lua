-- kiln.nvim: Kiln's workspace, sandboxed runs, verify, traces, services and publishing inside Neovim.
-- Thin on purpose: every action is one MCP tool call to `kiln mcp`; the files beside this one
-- only turn results into buffers, the quickfix list and messages. This one is the public API,
-- the :Kiln command and its completion.
local config = require('kiln.config')
local core = require('kiln.core')
local mcp = require('kiln.mcp')
local ui = require('kiln.ui')
local run = require('kiln.run')
local verify = require('kiln.verify')
local traces = require('kiln.traces')
local publish = require('kiln.publish')
local services = require('kiln.services')
local checkpoints = require('kiln.checkpoints')

local nn = mcp.nn
local levels = vim.log.levels
local state = core.state
local done = core.done
local words = core.words

local M = {}

M.subcommands = core.subcommands
M.trace_kinds = core.trace_kinds
M.trace_statuses = core.trace_statuses
M.share_modes = core.share_modes
M.tools_used = core.tools_used
M._state = state

M.session = core.session
M.call = core.call
M.run = run.run
M.stop_run = run.stop_run
M.verify = verify.verify
M.qf_items = verify.qf_items
M.traces = traces.traces
M.trace = traces.trace
M.publish = publish.publish
M.services = services.services
M.service_restart = services.restart
M.services_start = services.start
M.changes = checkpoints.changes
M.checkpoints = checkpoints.checkpoints
M.restore = checkpoints.restore

-- kiln.last_verify and kiln.last_run: the last finished results.
setmetatable(M, {
  __index = function(_, k)
    if k == 'last_verify' or k == 'last_run' then
      return state[k]
    end
  end,
})

-- :Kiln open -----------------------------------------------------------------------------------

function M.open(path, cb)
  path = (path and path ~= '') and core.abspath(path) or vim.fn.getcwd()
  if not state.session or state.session.state ~= 'running' then
    state.workspace = path
  end
  M.session(function(err, s)
    if err then
      return done(cb, err)
    end
    s:open_workspace(path, function(werr, ws)
      if werr then
        ui.notify('workspace_open: ' .. werr, levels.ERROR)
        return done(cb, werr)
      end
      state.workspace = s.root
      local cfg = nn(ws.config) or {}
      local checks = nn(cfg.verify) or {}
      ui.notify(string.format('workspace %s at %s (%s)', nn(ws.name) or '?', s.root,
        nn(ws.config_source) == 'kiln.json' and (#checks .. ' checks in kiln.json') or 'no kiln.json'), levels.INFO, true)
      if nn(ws.config_error) then
        ui.notify('kiln.json: ' .. ws.config_error, levels.WARN)
      end
      done(cb, nil, ws)
    end)
  end)
end

-- :Kiln stop -----------------------------------------------------------------------------------

--- Cancels everything in flight (runs, verify); returns how many requests were cancelled.
function M.stop()
  local s = state.session
  local n = 0
  if s then
    local ids = vim.tbl_keys(s.active)
    for _, id in ipairs(ids) do
      if s.active[id] and s.active[id].name ~= 'workspace_open' then
        s:cancel(id, 'cancelled from Neovim')
        n = n + 1
      end
    end
  end
  ui.notify(n == 0 and 'nothing is running' or string.format('cancelled %d request%s', n, n == 1 and '' or 's'))
  return n
end

-- :Kiln log, status, restart --------------------------------------------------------------------

function M.log()
  local buf = ui.scratch('kiln://log', 'kilnlog', {
    ['r'] = { function()
      M.log()
    end, 'redraw' },
  })
  state.log_buf = buf
  local lines = {}
  for _, e in ipairs(state.log) do
    lines[#lines + 1] = core.log_line(e)
  end
  if #lines == 0 then
    lines[1] = '(nothing logged yet: the server starts with the first :Kiln command)'
  end
  ui.set_lines(buf, 0, -1, lines)
  ui.show(buf)
  vim.api.nvim_win_set_cursor(0, { #lines, 0 })
  return buf
end

function M.status_lines()
  local s = state.session
  local lines = {}
  if not s then
    lines[1] = 'Kiln: not started (the first :Kiln command starts it)'
  else
    local info = s.server_info or {}
    lines[1] = string.format('Kiln: %s%s%s', s.state, s.pid and (', pid ' .. s.pid) or '',
      info.version and (', kiln ' .. info.version) or '')
    if s.workspace then
      lines[#lines + 1] = string.format('workspace %s at %s', nn(s.workspace.name) or '?', s.root)
    elseif s.workspace_error then
      lines[#lines + 1] = 'no workspace: ' .. s.workspace_error
    end
    for _, h in pairs(s.active) do
      lines[#lines + 1] = string.format('running: %s (%s)', h.label, ui.duration((vim.uv or vim.loop).now() - h.started))
    end
  end
  return lines
end

function M.status()
  local chunks = {}
  for i, l in ipairs(M.status_lines()) do
    chunks[#chunks + 1] = { (i > 1 and '\n' or '') .. l }
  end
  vim.api.nvim_echo(chunks, true, {})
end

--- For statuslines: "" when idle, else what runs, e.g. "kiln: verify" or "kiln: 2 running".
function M.statusline()
  local s = state.session
  if not s then
    return ''
  end
  local labels = {}
  for _, h in pairs(s.active) do
    labels[#labels + 1] = h.name == 'sandbox_exec' and 'run' or h.name
  end
  if #labels == 0 then
    return s.state == 'starting' and 'kiln: starting' or ''
  end
  return #labels == 1 and ('kiln: ' .. labels[1]) or string.format('kiln: %d running', #labels)
end

--- Stops the server and starts a new one on the same workspace.
function M.restart(cb)
  local old = state.session
  state.session = nil
  state.verify = nil
  local function start()
    M.session(function(err, s)
      if not err then
        ui.notify(string.format('restarted (pid %s)', s.pid))
      end
      done(cb, err, s)
    end)
  end
  if old and old.state ~= 'stopped' and old.state ~= 'exited' and old.state ~= 'failed' then
    old:stop(start)
  else
    start()
  end
end

--- Stops the server (Neovim is exiting).
function M.shutdown()
  if state.session then
    state.session:stop_now()
    state.session = nil
  end
end

-- The :Kiln command ------------------------------------------------------------------------------

local handlers = {
  open = function(rest)
    M.open(rest)
  end,
  run = function(rest)
    M.run(rest)
  end,
  verify = function(_, argv)
    M.verify(argv)
  end,
  traces = function(_, argv)
    local filter = {}
    for _, a in ipairs(argv) do
      if a:match('^tr_') then
        return M.trace(a)
      elseif vim.tbl_contains(M.trace_kinds, a) then
        filter.kind = a
      elseif vim.tbl_contains(M.trace_statuses, a) then
        filter.status = a
      else
        return ui.notify(string.format('traces: %q is not a kind (%s), a status (%s) or a trace id', a,
          table.concat(M.trace_kinds, ', '), table.concat(M.trace_statuses, ', ')), levels.ERROR)
      end
    end
    M.traces(filter)
  end,
  changes = function(_, argv)
    if argv[1] and argv[1]:match('^cp_') then
      return checkpoints.since(argv[1])
    end
    M.changes(argv[1])
  end,
  checkpoints = function()
    M.checkpoints()
  end,
  restore = function(_, argv)
    M.restore(argv[1])
  end,
  services = function()
    M.services()
  end,
  publish = function(_, argv)
    -- PATH, then in any order a share mode and an artifact name.
    local share, name
    for i = 2, #argv do
      if vim.tbl_contains(M.share_modes, argv[i]) and not share then
        share = argv[i]
      elseif not name and argv[i]:match('^[a-z0-9][a-z0-9-]*$') then
        name = argv[i]
      else
        return ui.notify(string.format('publish: %q is neither a share mode (%s) nor an artifact name (a-z, 0-9, -); usage: :Kiln publish PATH [SHARE] [NAME]',
          argv[i], table.concat(M.share_modes, ', ')), levels.ERROR)
      end
    end
    M.publish(argv[1], share, nil, { name = name })
  end,
  log = function()
    M.log()
  end,
  restart = function()
    M.restart()
  end,
  stop = function()
    M.stop()
  end,
  status = function()
    M.status()
  end,
}

function M.command(opts)
  local sub, rest = (opts.args or ''):match('^%s*(%S*)%s*(.-)%s*$')
  if sub == '' then
    sub = 'status'
  end
  local h = handlers[sub]
  if not h then
    return ui.notify(string.format('unknown subcommand %q; use one of: %s', sub, table.concat(M.subcommands, ', ')), levels.ERROR)
  end
  h(rest, words(rest))
end

local function starting_with(list, prefix)
  return vim.tbl_filter(function(c)
    return c:sub(1, #prefix) == prefix
  end, list)
end

--- The check names of the open workspace's kiln.json, as the server parsed it.
function M.check_names()
  local s = state.session
  local cfg = s and s.workspace and nn(s.workspace.config)
  local names = {}
  for _, c in ipairs(type(cfg) == 'table' and nn(cfg.verify) or {}) do
    if type(c) == 'table' and type(c.name) == 'string' then
      names[#names + 1] = c.name
    end
  end
  return names
end

function M.complete(arglead, cmdline, cursorpos)
  local before = cmdline:sub(1, cursorpos)
  local argv = words(before)
  if before:match('%s$') then
    argv[#argv + 1] = ''
  end
  local n = #argv
  if n <= 2 then
    return starting_with(M.subcommands, arglead)
  end
  local sub = argv[2]
  if sub == 'open' then
    return n == 3 and vim.fn.getcompletion(arglead, 'dir') or {}
  elseif sub == 'run' then
    return vim.fn.getcompletion(arglead, n == 3 and 'shellcmd' or 'file')
  elseif sub == 'verify' then
    local given = {}
    for i = 3, n - 1 do
      given[argv[i]] = true
    end
    return starting_with(vim.tbl_filter(function(c)
      return not given[c]
    end, M.check_names()), arglead)
  elseif sub == 'traces' then
    return starting_with(vim.list_extend(vim.deepcopy(M.trace_kinds), M.trace_statuses), arglead)
  elseif sub == 'publish' then
    if n == 3 then
      return vim.fn.getcompletion(arglead, 'file')
    elseif n == 4 then
      return starting_with(M.share_modes, arglead)
    end
    return {}
  end
  return {}
end

--- Options (see :help kiln-setup). Returns the list of problems found in `opts` (also shown).
function M.setup(opts)
  local problems = config.set(opts)
  for _, p in ipairs(problems) do
    ui.notify('setup: ' .. p, levels.WARN)
  end
  return problems
end

ui.define_highlights()
local group = vim.api.nvim_create_augroup('kiln', { clear = true })
vim.api.nvim_create_autocmd('ColorScheme', { group = group, callback = ui.define_highlights })
vim.api.nvim_create_autocmd('VimLeavePre', { group = group, callback = M.shutdown })

return M

