-- One MCP client session with `kiln mcp`: the handshake, roots, tool calls with progress and
-- cancellation, and the server's log. It knows MCP, not the editor's windows.
local rpc = require('kiln.rpc')
local uv = vim.uv or vim.loop

local M = {}

M.PROTOCOL_VERSION = '2025-06-18'
M.CLIENT_INFO = { name = 'kiln.nvim', version = '0.1.0' }
M.LOG_MAX = 2000

local Session = {}
Session.__index = Session

local function nn(v)
  if v == vim.NIL then
    return nil
  end
  return v
end
M.nn = nn

local function err_text(err)
  if type(err) == 'table' then
    local msg = nn(err.message) or vim.json.encode(err)
    if err.code then
      msg = msg .. ' (' .. tostring(err.code) .. ')'
    end
    return msg
  end
  return tostring(err)
end

-- The text of a tool result's content blocks.
local function content_text(result)
  local parts = {}
  for _, block in ipairs(nn(result.content) or {}) do
    if type(block) == 'table' and block.type == 'text' and type(block.text) == 'string' then
      parts[#parts + 1] = block.text
    end
  end
  return table.concat(parts, '\n')
end
M.content_text = content_text

--- opts: cmd (list: program and arguments), cwd, env, workspace (the folder to open and offer as
---       the root), roots (false: declare no roots capability), open (false: no workspace_open),
---       log_level (for logging/setLevel), on_log(entry), on_exit(session, code, signal),
---       init_timeout_ms
function M.new(opts)
  return setmetatable({
    opts = opts,
    state = 'stopped',
    log = {},
    active = {},
    progress = {},
    waiters = {},
    token_seq = 0,
    root = opts.workspace,
  }, Session)
end

function Session:add_log(source, level, text)
  for line in (tostring(text) .. '\n'):gmatch('(.-)\n') do
    local entry = { time = os.time(), source = source, level = level, text = line }
    table.insert(self.log, entry)
    if #self.log > M.LOG_MAX then
      table.remove(self.log, 1)
    end
    if self.opts.on_log then
      self.opts.on_log(entry)
    end
  end
end

function Session:_ready(err)
  if not err and (self.state == 'exited' or self.state == 'stopped') then
    err = 'kiln exited during start-up (code ' .. tostring(self.exit_code) .. '); see :Kiln log'
  end
  if self.state == 'starting' or err then
    self.state = err and 'failed' or 'running'
  end
  self.error = err
  local waiters = self.waiters
  self.waiters = {}
  for _, cb in ipairs(waiters) do
    cb(err, self)
  end
end

function Session:_handlers()
  return {
    on_request = function(method, _)
      if method == 'roots/list' then
        local root = self.root or vim.fn.getcwd()
        return { roots = { { uri = vim.uri_from_fname(root), name = vim.fn.fnamemodify(root, ':t') } } }
      elseif method == 'ping' then
        return vim.empty_dict()
      end
      return nil, { code = -32601, message = 'kiln.nvim does not handle ' .. method }
    end,
    on_notification = function(method, params)
      params = params or {}
      if method == 'notifications/progress' then
        local h = self.progress[nn(params.progressToken) or '']
        if h then
          h(params)
        end
      elseif method == 'notifications/message' then
        local data = nn(params.data)
        if type(data) ~= 'string' then
          data = vim.json.encode(data)
        end
        local logger = nn(params.logger)
        self:add_log('server', nn(params.level) or 'info', (logger and ('[' .. logger .. '] ') or '') .. data)
      end
    end,
    on_stderr = function(line)
      self:add_log('stderr', 'info', line)
    end,
    on_protocol_error = function(message)
      self:add_log('plugin', 'error', message)
    end,
    on_exit = function(code, signal)
      local expected = self.stopping
      self.state = expected and 'stopped' or 'exited'
      self.exit_code, self.exit_signal = code, signal
      self:add_log('plugin', expected and 'info' or 'error', string.format('kiln exited (code %s, signal %s)', code, signal))
      for id, h in pairs(self.active) do
        self.active[id] = nil
        if h.finish then
          h.finish('kiln exited (code ' .. tostring(code) .. ')', nil, nil, false)
        end
      end
      if self.state_waiting_init then
        self.state_waiting_init = false
        self:_ready('kiln exited during start-up (code ' .. tostring(code) .. '); see :Kiln log')
      end
      if self.opts.on_exit then
        self.opts.on_exit(self, code, signal, expected)
      end
    end,
  }
end

--- Starts the server, initializes and opens the workspace; cb(err, session) once ready.
function Session:start(cb)
  if cb then
    table.insert(self.waiters, cb)
  end
  if self.state == 'running' or self.state == 'failed' then
    return self:_ready(self.error)
  end
  if self.state == 'starting' then
    return
  end
  self.state = 'starting'
  local cmd = self.opts.cmd
  local args = {}
  for i = 2, #cmd do
    args[#args + 1] = cmd[i]
  end
  self:add_log('plugin', 'info', 'starting ' .. table.concat(cmd, ' '))
  local client, err = rpc.start(cmd[1], args, { cwd = self.opts.cwd, env = self.opts.env }, self:_handlers())
  if not client then
    self:add_log('plugin', 'error', 'cannot start ' .. cmd[1] .. ': ' .. err)
    return self:_ready('cannot start ' .. cmd[1] .. ': ' .. err)
  end
  self.rpc = client
  self.pid = client.pid
  self.state_waiting_init = true

  local timer = uv.new_timer()
  timer:start(self.opts.init_timeout_ms or 15000, 0, vim.schedule_wrap(function()
    timer:close()
    if self.state == 'starting' then
      self.state_waiting_init = false
      self:add_log('plugin', 'error', 'no answer to initialize')
      self:_ready('kiln did not answer initialize in time; see :Kiln log')
      self:stop()
    end
  end))

  client:request('initialize', {
    protocolVersion = M.PROTOCOL_VERSION,
    capabilities = self.opts.roots == false and vim.empty_dict() or { roots = { listChanged = true } },
    clientInfo = M.CLIENT_INFO,
  }, function(ierr, result)
    if self.state ~= 'starting' then
      return
    end
    self.state_waiting_init = false
    if ierr then
      return self:_ready('initialize failed: ' .. err_text(ierr))
    end
    self.server_info = nn(result.serverInfo) or {}
    self.capabilities = nn(result.capabilities) or {}
    self.protocol_version = nn(result.protocolVersion)
    client:notify('notifications/initialized')
    if self.opts.log_level and self.capabilities.logging then
      client:request('logging/setLevel', { level = self.opts.log_level }, function() end)
    end
    if self.opts.open == false then
      return self:_ready(nil)
    end
    -- Open the folder explicitly too (the server also opens our root from roots/list), so the
    -- root and kiln.json are known before the first command.
    self:open_workspace(self.root or vim.fn.getcwd(), function(werr)
      if werr then
        self.workspace_error = werr
      end
      self:_ready(nil)
    end, true)
  end)
end

--- Calls workspace_open; on success remembers the workspace (its root, name, kiln.json).
function Session:open_workspace(path, cb, during_start)
  self:call_tool('workspace_open', { path = path }, { during_start = during_start }, function(err, ws)
    if not err and type(ws) == 'table' then
      self.workspace = ws
      self.root = nn(ws.root) or path
      self.workspace_error = nil
    end
    cb(err, ws)
  end)
end

--- Sends a plain request (tools/list, ping, ...); cb(err_text, result).
function Session:request(method, params, cb)
  if not self.rpc or self.state ~= 'running' and self.state ~= 'starting' then
    return cb('kiln is not running')
  end
  local id, err = self.rpc:request(method, params, function(rerr, result)
    if rerr then
      return cb(err_text(rerr))
    end
    cb(nil, result)
  end)
  if not id then
    cb(err)
  end
end

--- Calls a tool. opts.on_progress(params) receives notifications/progress for this call.
--- cb(err, value, info): value is structuredContent (or the parsed text content); err is the
--- tool's message when isError; info = {cancelled = bool, raw = result}.
--- Returns a handle with .id and :cancel(reason), or nil when the request could not be sent.
function Session:call_tool(name, args, opts, cb)
  opts = opts or {}
  if not self.rpc or not (self.state == 'running' or opts.during_start and self.state == 'starting') then
    cb('kiln is not running', nil, { cancelled = false })
    return nil
  end
  if args == nil or next(args) == nil then
    args = vim.empty_dict()
  end
  local params = { name = name, arguments = args }
  local handle = { name = name, started = uv.now(), label = opts.label or name }
  if opts.on_progress then
    self.token_seq = self.token_seq + 1
    handle.token = 'kiln.nvim/' .. self.token_seq
    params._meta = { progressToken = handle.token }
    self.progress[handle.token] = opts.on_progress
  end
  local done = false
  handle.finish = function(err, value, raw, cancelled)
    if done then
      return
    end
    done = true
    if handle.token then
      self.progress[handle.token] = nil
    end
    if handle.id then
      self.active[handle.id] = nil
    end
    cb(err, value, { cancelled = cancelled, raw = raw })
  end
  local id, serr = self.rpc:request('tools/call', params, function(rerr, result)
    if rerr then
      return handle.finish(err_text(rerr), nil, nil, false)
    end
    result = result or {}
    local value = nn(result.structuredContent)
    local text = content_text(result)
    if value == nil and text ~= '' then
      local ok, decoded = pcall(vim.json.decode, text)
      value = ok and decoded or text
    end
    if result.isError == true then
      return handle.finish(text ~= '' and text or 'tool error', value, result, false)
    end
    handle.finish(nil, value, result, false)
  end)
  if not id then
    handle.finish(serr, nil, nil, false)
    return nil
  end
  handle.id = id
  handle.cancel = function(_, reason)
    self:cancel(id, reason)
  end
  self.active[id] = handle
  return handle
end

--- Cancels an in-flight request: notifications/cancelled to the server (which kills what the call
--- runs and sends no response), and the caller hears "cancelled" at once.
function Session:cancel(id, reason)
  local h = self.active[id]
  if not h then
    return false
  end
  if self.rpc then
    self.rpc:notify('notifications/cancelled', { requestId = id, reason = reason or 'cancelled by the user' })
    self.rpc:forget(id)
  end
  self:add_log('plugin', 'info', 'cancelled request ' .. id .. ' (' .. h.label .. ')')
  h.finish('cancelled', nil, nil, true)
  return true
end

function Session:is_running()
  return self.state == 'running'
end

--- Stops the server: cancels what is in flight, closes stdin, then TERM/KILL if it lingers.
function Session:stop(cb)
  self.stopping = true
  for id in pairs(self.active) do
    self:cancel(id, 'kiln.nvim is stopping the server')
  end
  if self.rpc then
    self.rpc:stop(self.opts.stop_grace_ms or 3000, cb)
  else
    self.state = 'stopped'
    if cb then
      vim.schedule(cb)
    end
  end
end

--- Stops at once while Neovim exits (waits at most ~1 s).
function Session:stop_now()
  self.stopping = true
  if self.rpc then
    self.rpc:stop_now(500)
  end
end

return M
