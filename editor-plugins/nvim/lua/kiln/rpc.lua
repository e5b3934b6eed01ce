-- Newline-delimited JSON-RPC 2.0 over a child process's stdio, on the libuv loop Neovim already
-- runs (vim.uv, called vim.loop before 0.10), so the plugin needs no dependency and never blocks.
local uv = vim.uv or vim.loop

local M = {}

local Rpc = {}
Rpc.__index = Rpc

-- luv callbacks run in a "fast" context where most of the API is off limits: hand everything to
-- the main loop, in arrival order.
local function later(fn, ...)
  local args = { n = select('#', ...), ... }
  vim.schedule(function()
    fn(unpack(args, 1, args.n))
  end)
end

local function close_handle(h)
  if h and not h:is_closing() then
    h:close()
  end
end

-- Splits a byte stream into lines; returns a function fed with chunks (nil at end of stream).
-- Pieces of an unfinished line are kept in a list, so a large message arriving in many chunks is
-- joined once rather than rescanned on every read.
local function line_splitter(on_line)
  local parts = {}
  return function(chunk)
    if chunk == nil then
      if #parts > 0 then
        local line = table.concat(parts)
        parts = {}
        on_line((line:gsub('\r$', '')))
      end
      return
    end
    local start = 1
    while true do
      local nl = chunk:find('\n', start, true)
      if not nl then
        if start <= #chunk then
          parts[#parts + 1] = chunk:sub(start)
        end
        return
      end
      parts[#parts + 1] = chunk:sub(start, nl - 1)
      local line = table.concat(parts)
      parts = {}
      start = nl + 1
      on_line((line:gsub('\r$', '')))
    end
  end
end

-- The environment for uv.spawn, which replaces it whole: ours plus `extra` (false removes a name).
local function build_env(extra)
  if not extra or next(extra) == nil then
    return nil
  end
  local env = vim.fn.environ()
  for k, v in pairs(extra) do
    if v == false then
      env[k] = nil
    else
      env[k] = tostring(v)
    end
  end
  local list = {}
  for k, v in pairs(env) do
    list[#list + 1] = k .. '=' .. v
  end
  return list
end

--- Starts `cmd` with `args` and speaks JSON-RPC on its stdin/stdout.
--- handlers: on_request(method, params) -> result | nil, {code, message}
---           on_notification(method, params), on_stderr(line), on_exit(code, signal),
---           on_protocol_error(message)  (a line that is not JSON-RPC)
--- Returns the client, or nil and an error message when the process cannot be started.
function M.start(cmd, args, opts, handlers)
  opts = opts or {}
  handlers = handlers or {}
  local self = setmetatable({
    next_id = 0,
    pending = {},
    handlers = handlers,
    closing = false,
    exited = false,
  }, Rpc)

  local stdin, stdout, stderr = uv.new_pipe(false), uv.new_pipe(false), uv.new_pipe(false)
  local handle, pid_or_err = uv.spawn(cmd, {
    args = args,
    stdio = { stdin, stdout, stderr },
    cwd = opts.cwd,
    env = build_env(opts.env),
    detached = false,
  }, function(code, signal)
    self.exited = true
    self.exit_code, self.exit_signal = code, signal
    close_handle(stdin)
    close_handle(self.handle)
    later(function()
      self.exit_seen = true
      self:_maybe_finish()
    end)
  end)
  if not handle then
    close_handle(stdin)
    close_handle(stdout)
    close_handle(stderr)
    return nil, tostring(pid_or_err)
  end
  self.handle, self.pid = handle, pid_or_err
  self.stdin, self.stdout, self.stderr = stdin, stdout, stderr

  local on_stdout_line = line_splitter(function(line)
    self:_on_line(line)
  end)
  stdout:read_start(function(err, chunk)
    if err or chunk == nil then
      close_handle(stdout)
      later(function()
        on_stdout_line(nil)
        self.stdout_done = true
        self:_maybe_finish()
      end)
      return
    end
    later(on_stdout_line, chunk)
  end)

  local on_stderr_line = line_splitter(function(line)
    if handlers.on_stderr then
      handlers.on_stderr(line)
    end
  end)
  stderr:read_start(function(err, chunk)
    if err or chunk == nil then
      close_handle(stderr)
    end
    later(on_stderr_line, chunk)
  end)
  return self
end

-- The end comes once the process has exited and everything it wrote has been read, so a
-- response written just before exiting still reaches its caller.
function Rpc:_maybe_finish()
  if self.finished or not self.exit_seen then
    return
  end
  if not self.stdout_done then
    -- A grandchild may hold stdout open; give it a moment, then finish anyway.
    if not self.finish_timer then
      self.finish_timer = true
      vim.defer_fn(function()
        self.stdout_done = true
        self:_maybe_finish()
      end, 500)
    end
    return
  end
  self.finished = true
  local code, signal = self.exit_code, self.exit_signal
  self:_fail_pending('kiln exited (code ' .. tostring(code) .. ', signal ' .. tostring(signal) .. ')')
  if self.handlers.on_exit then
    self.handlers.on_exit(code, signal)
  end
  self:_run_waiters()
end

function Rpc:_send(msg)
  if self.exited or self.closing or not self.stdin or self.stdin:is_closing() then
    return false, 'kiln is not running'
  end
  local ok, line = pcall(vim.json.encode, msg)
  if not ok then
    return false, 'cannot encode message: ' .. tostring(line)
  end
  self.stdin:write(line .. '\n')
  return true
end

function Rpc:_fail_pending(message)
  local pending = self.pending
  self.pending = {}
  for _, cb in pairs(pending) do
    cb({ code = -32000, message = message }, nil)
  end
end

function Rpc:_respond(id, result, err)
  if err then
    self:_send({ jsonrpc = '2.0', id = id, error = err })
  else
    self:_send({ jsonrpc = '2.0', id = id, result = result == nil and vim.empty_dict() or result })
  end
end

function Rpc:_on_line(line)
  if line:match('^%s*$') then
    return
  end
  local ok, msg = pcall(vim.json.decode, line)
  if not ok or type(msg) ~= 'table' then
    if self.handlers.on_protocol_error then
      self.handlers.on_protocol_error('not JSON-RPC: ' .. line:sub(1, 200))
    end
    return
  end
  local id = msg.id ~= vim.NIL and msg.id or nil
  local method = msg.method ~= vim.NIL and msg.method or nil
  if method and id ~= nil then
    local h = self.handlers.on_request
    local okh, result, err
    if h then
      okh, result, err = pcall(h, method, msg.params ~= vim.NIL and msg.params or nil)
      if not okh then
        result, err = nil, { code = -32603, message = tostring(result) }
      end
    end
    if result == nil and err == nil then
      err = { code = -32601, message = 'method not found: ' .. method }
    end
    self:_respond(id, result, err)
  elseif method then
    if self.handlers.on_notification then
      self.handlers.on_notification(method, msg.params ~= vim.NIL and msg.params or nil)
    end
  elseif id ~= nil then
    local cb = self.pending[id]
    if cb then
      self.pending[id] = nil
      local err = msg.error
      if err ~= nil and err ~= vim.NIL then
        cb(err, nil)
      else
        cb(nil, msg.result)
      end
    end
    -- A response nobody waits for (a request we cancelled) is dropped.
  end
end

--- Sends a request; cb(err, result) runs on the main loop. Returns the request id, or nil and
--- an error message (cb is then not called).
function Rpc:request(method, params, cb)
  self.next_id = self.next_id + 1
  local id = self.next_id
  self.pending[id] = cb
  local ok, err = self:_send({ jsonrpc = '2.0', id = id, method = method, params = params or vim.empty_dict() })
  if not ok then
    self.pending[id] = nil
    return nil, err
  end
  return id
end

--- Forgets a pending request: its response, if one still comes, is dropped.
function Rpc:forget(id)
  local cb = self.pending[id]
  self.pending[id] = nil
  return cb
end

function Rpc:notify(method, params)
  return self:_send({ jsonrpc = '2.0', method = method, params = params or vim.empty_dict() })
end

function Rpc:is_running()
  return not self.exited
end

--- Closes stdin (the server's cue to shut down cleanly), then SIGTERM after `grace_ms` and
--- SIGKILL after as long again if it is still there. on_done runs once it has exited.
function Rpc:stop(grace_ms, on_done)
  grace_ms = grace_ms or 3000
  self.closing = true
  if on_done then
    self.waiters = self.waiters or {}
    table.insert(self.waiters, on_done)
  end
  if self.finished then
    self:_run_waiters()
    return
  end
  if self.exited then
    return
  end
  if self.stdin and not self.stdin:is_closing() then
    self.stdin:shutdown(function()
      close_handle(self.stdin)
    end)
  end
  local timer = uv.new_timer()
  local step = 0
  timer:start(grace_ms, grace_ms, function()
    step = step + 1
    if self.exited or step > 2 then
      timer:stop()
      close_handle(timer)
      return
    end
    pcall(self.handle.kill, self.handle, step == 1 and 'sigterm' or 'sigkill')
  end)
end

function Rpc:_run_waiters()
  local waiters = self.waiters or {}
  self.waiters = {}
  for _, fn in ipairs(waiters) do
    fn()
  end
end

--- Stops at once (Neovim is exiting): close stdin and SIGTERM, then wait up to `ms` for the exit.
function Rpc:stop_now(ms)
  self.closing = true
  if self.exited then
    return true
  end
  if self.stdin and not self.stdin:is_closing() then
    close_handle(self.stdin)
  end
  local waited = vim.wait(ms or 500, function()
    return self.exited
  end, 10)
  if not waited and self.handle and not self.handle:is_closing() then
    pcall(self.handle.kill, self.handle, 'sigterm')
    waited = vim.wait(ms or 500, function()
      return self.exited
    end, 10)
    if not waited then
      pcall(self.handle.kill, self.handle, 'sigkill')
    end
  end
  return self.exited
end

M._line_splitter = line_splitter
return M
