-- :checkhealth kiln: finds the server, starts a throwaway session to see that it answers MCP and
-- offers the tools the plugin calls, and reports the live session and the clipboard.
local M = {}

local health = vim.health or require('health')
local report = {
  start = health.start or health.report_start,
  ok = health.ok or health.report_ok,
  info = health.info or health.report_info,
  warn = health.warn or health.report_warn,
  error = health.error or health.report_error,
}

local function check_server(cmd)
  local mcp = require('kiln.mcp')
  local config = require('kiln.config')
  local session = mcp.new({ cmd = cmd, env = config.options.env, roots = false, open = false, init_timeout_ms = 10000 })
  local started, err
  session:start(function(e)
    started, err = true, e
  end)
  vim.wait(12000, function()
    return started
  end, 20)
  if not started or err then
    report.error('`' .. table.concat(cmd, ' ') .. '` did not complete the MCP handshake: ' .. tostring(err or 'timed out'))
    local tail = {}
    for i = math.max(1, #session.log - 5), #session.log do
      tail[#tail + 1] = session.log[i].text
    end
    if #tail > 0 then
      report.info('its log ends:\n' .. table.concat(tail, '\n'))
    end
    session:stop()
    return
  end
  local info = session.server_info or {}
  report.ok(string.format('MCP handshake: %s %s, protocol %s', tostring(info.name), tostring(info.version), tostring(session.protocol_version)))
  local tools, terr
  session:request('tools/list', vim.empty_dict(), function(e, res)
    terr, tools = e, res and res.tools or {}
    if e then
      tools = {}
    end
  end)
  vim.wait(5000, function()
    return tools ~= nil
  end, 20)
  if terr or not tools then
    report.error('tools/list failed: ' .. tostring(terr or 'timed out'))
  else
    local have = {}
    for _, t in ipairs(tools) do
      have[t.name] = true
    end
    local missing = {}
    for _, name in ipairs(require('kiln').tools_used) do
      if not have[name] then
        missing[#missing + 1] = name
      end
    end
    if #missing == 0 then
      report.ok(string.format('the server offers the %d tools the plugin uses (of %d)', #require('kiln').tools_used, #tools))
    else
      report.error('the server lacks ' .. table.concat(missing, ', '), { 'update kiln: this plugin needs a newer server' })
    end
  end
  local stopped = false
  session:stop(function()
    stopped = true
  end)
  vim.wait(4000, function()
    return stopped
  end, 20)
end

function M.check()
  local config = require('kiln.config')
  report.start('kiln.nvim')
  local v = vim.version()
  local vs = string.format('%d.%d.%d', v.major, v.minor, v.patch)
  if vim.fn.has('nvim-0.7') == 1 then
    report.ok('Neovim ' .. vs .. ' (0.7 or newer), JSON-RPC over ' .. (vim.uv and 'vim.uv' or 'vim.loop'))
  else
    report.error('Neovim ' .. vs .. ' is too old: kiln.nvim needs 0.7 or newer')
  end
  if #config.problems == 0 then
    report.ok('setup options are valid')
  else
    for _, p in ipairs(config.problems) do
      report.warn('setup: ' .. p, { 'see :help kiln-setup' })
    end
  end

  report.start('kiln server')
  local cmd, err = config.command()
  if not cmd then
    report.error(err, { 'install Kiln (make build leaves build/kiln) and put it on PATH', "or require('kiln').setup{ cmd = '/path/to/kiln' }" })
  else
    local out = vim.fn.system({ cmd[1], '--version' })
    if vim.v.shell_error == 0 then
      report.ok(cmd[1] .. ': ' .. vim.trim(out))
    else
      report.warn(cmd[1] .. ' --version failed: ' .. vim.trim(out))
    end
    check_server(cmd)
  end

  report.start('kiln.nvim session')
  local kiln = require('kiln')
  for _, l in ipairs(kiln.status_lines()) do
    report.info((l:gsub('^Kiln: ', '')))
  end
  if vim.fn.has('clipboard') == 1 then
    report.ok('clipboard provider found: published URLs go to the ' .. config.options.register .. ' register too')
  elseif config.options.register == '+' or config.options.register == '*' then
    report.warn('no clipboard provider: published URLs go to the unnamed register only', { 'install xclip, xsel or wl-clipboard; :help clipboard' })
  end
end

return M
