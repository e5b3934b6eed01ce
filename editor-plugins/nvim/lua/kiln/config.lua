-- The options of require('kiln').setup{}: defaults, merging and checking, in one place so
-- :checkhealth and the docs agree with what the code does.
local M = {}

M.defaults = {
  -- The server: a program name on PATH or a path (then `args` follow it), or a list that is the
  -- whole command line, as in nvim-lspconfig: { '/opt/kiln/kiln', '--state-dir', '/tmp/k', 'mcp' }.
  cmd = 'kiln',
  -- Arguments after a string cmd (a list cmd has its own).
  args = { 'mcp' },
  -- Extra environment for the server (false removes a variable), e.g. { KILN_HOME = '...' }.
  env = {},
  -- The folder opened as the workspace; nil: Neovim's current directory when the server starts.
  workspace = nil,
  -- Level for logging/setLevel: what the server sends to :Kiln log besides its stderr.
  log_level = 'info',
  -- How verify progress is shown: 'echo', 'notify', false, or function(message, params).
  progress = 'echo',
  -- Open the quickfix window after a failing verify (and close it after a passing one).
  open_quickfix = true,
  -- Register that receives a published URL besides the unnamed one ("" for none).
  register = '+',
  -- Command that opens a window for Kiln's scratch buffers (run output, traces, log).
  split = 'botright 15split',
  -- Wall-clock seconds for :Kiln run (nil: the workspace's kiln.json or Kiln's default).
  run_timeout_s = nil,
  -- Traces listed per page in :Kiln traces.
  traces_limit = 50,
  -- Milliseconds to wait for the answer to initialize before giving up.
  init_timeout_ms = 15000,
}

local types = {
  cmd = { 'string', 'table' },
  args = { 'table' },
  env = { 'table' },
  workspace = { 'string', 'nil' },
  log_level = { 'string', 'boolean' },
  progress = { 'string', 'boolean', 'function' },
  open_quickfix = { 'boolean' },
  register = { 'string' },
  split = { 'string' },
  run_timeout_s = { 'number', 'nil' },
  traces_limit = { 'number' },
  init_timeout_ms = { 'number' },
}

local enums = {
  log_level = { 'debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency' },
  progress = { 'echo', 'notify' },
}

--- Checks `opts`; returns the list of problems (empty when fine).
function M.check(opts)
  local problems = {}
  for k, v in pairs(opts or {}) do
    local want = types[k]
    if not want then
      problems[#problems + 1] = string.format('unknown option %q', tostring(k))
    elseif not vim.tbl_contains(want, type(v)) then
      problems[#problems + 1] = string.format('option %s: expected %s, got %s', k, table.concat(want, ' or '), type(v))
    elseif enums[k] and type(v) == 'string' and not vim.tbl_contains(enums[k], v) then
      problems[#problems + 1] = string.format('option %s: expected one of %s, got %q', k, table.concat(enums[k], ', '), v)
    end
  end
  if type((opts or {}).cmd) == 'table' and (opts or {}).args ~= nil then
    problems[#problems + 1] = 'option args is not used when cmd is a list: the list is the whole command line'
  end
  return problems
end

M.options = vim.deepcopy(M.defaults)
M.problems = {}

--- Merges user options over the defaults (lists replace, tables merge); returns the problems.
function M.set(opts)
  M.problems = M.check(opts)
  local merged = vim.deepcopy(M.defaults)
  for k, v in pairs(opts or {}) do
    if types[k] and vim.tbl_contains(types[k], type(v)) then
      merged[k] = v
    end
  end
  M.options = merged
  return M.problems
end

--- The server command line as a list, its program resolved on PATH: a list cmd as it is, a
--- string cmd followed by args. Returns nil and why when the program cannot be found.
function M.command()
  local o = M.options
  local whole = type(o.cmd) == 'table'
  local cmd = whole and vim.deepcopy(o.cmd) or { o.cmd }
  if #cmd == 0 or type(cmd[1]) ~= 'string' or cmd[1] == '' then
    return nil, 'option cmd is empty'
  end
  local exe = vim.fn.exepath(vim.fn.expand(cmd[1]))
  if exe == '' then
    return nil, string.format("'%s' is not an executable: put kiln on PATH or set require('kiln').setup{ cmd = '/path/to/kiln' }", cmd[1])
  end
  cmd[1] = exe
  if not whole then
    for _, a in ipairs(o.args or {}) do
      cmd[#cmd + 1] = a
    end
  end
  return cmd
end

return M
