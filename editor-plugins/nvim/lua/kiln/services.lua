-- :Kiln services: the services (kiln.json "services") of the session's live sandboxes, one list
-- in kiln://services (sandbox_list, then service_list per sandbox); R restarts the one under the
-- cursor (service_restart), <CR> opens its log, s starts kiln.json's services (sandbox_create).
local core = require('kiln.core')
local mcp = require('kiln.mcp')
local traces = require('kiln.traces')
local ui = require('kiln.ui')

local nn = mcp.nn
local levels = vim.log.levels
local state = core.state
local done = core.done

local M = {}

local NAME = 'kiln://services'
local COLUMNS = '%-8s %-14s %-9s %-26s %s'

--- cb(err, {{sandbox_id=, service=}, ...}) for every live sandbox the session sees.
function M.list(cb)
  core.call('sandbox_list', vim.empty_dict(), function(err, res)
    if err then
      return done(cb, err)
    end
    local sandboxes, out = nn(res.sandboxes) or {}, {}
    local function step(i)
      local sb = sandboxes[i]
      if not sb then
        return done(cb, nil, out)
      end
      core.call('service_list', { sandbox_id = sb.sandbox_id }, function(serr, sres)
        -- A sandbox gone (destroyed, or idle too long) since sandbox_list has nothing to show.
        for _, s in ipairs(not serr and nn(sres.services) or {}) do
          out[#out + 1] = { sandbox_id = sb.sandbox_id, service = s }
        end
        step(i + 1)
      end)
    end
    step(1)
  end)
end

local function render(buf, entries, declared)
  local ws = state.session and state.session.workspace
  local lines = {
    string.format('Kiln services%s · <CR> log · R restart · t trace · s start · r refresh · q close',
      ws and (' of ' .. (nn(ws.name) or '?')) or ''),
    string.format(COLUMNS, 'STATE', 'NAME', 'KIND', 'SANDBOX', 'URL'),
  }
  local marks = { { 0, 'KilnHeader' }, { 1, 'KilnDim' } }
  local rows = {}
  for _, e in ipairs(entries) do
    local s = e.service
    local st = nn(s.state) or '?'
    lines[#lines + 1] = string.format(COLUMNS, st, nn(s.name) or '?', nn(s.kind) or '?', e.sandbox_id, nn(s.url) or '')
    rows[#lines] = e
    marks[#marks + 1] = { #lines - 1, st == 'ready' and 'KilnPass' or st == 'starting' and 'KilnRunning' or 'KilnFail', 0, 8 }
    if nn(s.error) then
      lines[#lines + 1] = '  ✖ ' .. tostring(s.error):gsub('\n', ' ')
      rows[#lines] = e
      marks[#marks + 1] = { #lines - 1, 'KilnFail' }
    end
  end
  if #entries == 0 then
    if declared and #declared > 0 then
      local names = {}
      for _, d in ipairs(declared) do
        names[#names + 1] = string.format('%s (%s)', nn(d.name) or '?', nn(d.kind) or '?')
      end
      lines[#lines + 1] = '(no sandbox runs services: s starts those kiln.json declares: ' .. table.concat(names, ', ') .. ')'
    else
      lines[#lines + 1] = '(no sandbox runs services, and kiln.json declares none)'
    end
    marks[#marks + 1] = { #lines - 1, 'KilnDim' }
  end
  state.views[buf] = { rows = rows }
  vim.api.nvim_buf_clear_namespace(buf, ui.ns, 0, -1)
  ui.set_lines(buf, 0, -1, lines)
  ui.highlight(buf, marks)
end

local function load(buf, cb)
  M.list(function(err, entries)
    if err then
      ui.set_lines(buf, 0, -1, { 'Kiln services: ' .. err })
      ui.notify('services: ' .. err, levels.ERROR)
      return done(cb, err)
    end
    if #entries > 0 then
      render(buf, entries)
      return done(cb, nil, entries)
    end
    -- Nothing runs: say what `s` would start.
    core.call('workspace_info', vim.empty_dict(), function(_, info)
      render(buf, entries, info and nn(info.services) or {})
      done(cb, nil, entries)
    end)
  end)
end

local function under_cursor()
  local view = state.views[vim.api.nvim_get_current_buf()]
  local e = view and view.rows and view.rows[vim.api.nvim_win_get_cursor(0)[1]]
  if not e then
    ui.notify('no service on this line')
  end
  return e
end

--- Restarts a service; cb(err, service).
function M.restart(sandbox_id, name, cb)
  ui.echo('Kiln: restarting ' .. name .. '…', 'MoreMsg')
  core.call('service_restart', { sandbox_id = sandbox_id, name = name }, function(err, res)
    if err then
      ui.notify('service_restart: ' .. err, levels.ERROR)
      return done(cb, err)
    end
    local s = nn(res.service) or {}
    if nn(s.state) == 'failed' then
      ui.notify(string.format('%s failed after the restart: %s', name, nn(s.error) or 'see its log'), levels.ERROR)
    else
      ui.notify(string.format('%s restarted: %s at %s', name, nn(s.state) or '?', nn(s.url) or '?'))
    end
    done(cb, nil, s)
  end)
end

--- Starts the services kiln.json declares in a new session sandbox; cb(err, result).
function M.start(cb)
  ui.echo('Kiln: starting services…', 'MoreMsg')
  core.call('sandbox_create', { services = true }, function(err, res)
    if err then
      ui.notify('sandbox_create: ' .. err, levels.ERROR)
      return done(cb, err)
    end
    local names = {}
    for _, s in ipairs(nn(res.services) or {}) do
      names[#names + 1] = string.format('%s %s', s.name, nn(s.url) or '')
    end
    ui.notify(string.format('services started in %s: %s', res.sandbox_id, table.concat(names, ', ')))
    done(cb, nil, res)
  end)
end

-- Reads all of one stream through `read(offset, cb)`; cb(err, text).
local function read_all(read, cb, offset, acc)
  offset, acc = offset or 0, acc or {}
  read(offset, function(err, page)
    if err then
      return cb(err)
    end
    acc[#acc + 1] = nn(page.data) or ''
    local nxt = nn(page.next_offset) or offset
    if nn(page.eof) or nxt <= offset then
      return cb(nil, table.concat(acc))
    end
    read_all(read, cb, nxt, acc)
  end)
end

--- A service's log in kiln://service/SANDBOX/NAME: its trace's output (trace_output), or while
--- Kiln's trace store keeps none for services, its live run's (process_output). The service is
--- looked up again first: a restart gives it a new run.
function M.log(entry, cb)
  core.call('service_list', { sandbox_id = entry.sandbox_id }, function(err, res)
    for _, s in ipairs(not err and nn(res.services) or {}) do
      if s.name == entry.service.name then
        entry = { sandbox_id = entry.sandbox_id, service = s }
      end
    end
    M.show_log(entry, cb)
  end)
end

function M.show_log(entry, cb)
  local s = entry.service
  local buf = ui.scratch(string.format('kiln://service/%s/%s', entry.sandbox_id, s.name), 'kilnservicelog', {
    ['r'] = { function()
      M.log(entry)
    end, 'refresh' },
  })
  ui.set_lines(buf, 0, -1, { string.format('Service %s: loading…', s.name) })
  ui.show(buf)
  local function show(err, text)
    if err then
      ui.set_lines(buf, 0, -1, { string.format('Service %s: %s', s.name, err) })
      return done(cb, err)
    end
    local lines = { string.format('Service %s (%s, %s) · trace %s · r refresh · q close', s.name, nn(s.kind) or '?',
      nn(s.state) or '?', nn(s.trace_id) or '-') }
    for _, l in ipairs(vim.split(ui.clean(text):gsub('\n$', ''), '\n', { plain = true })) do
      lines[#lines + 1] = (l:gsub('\r', ''))
    end
    vim.api.nvim_buf_clear_namespace(buf, ui.ns, 0, -1)
    ui.set_lines(buf, 0, -1, lines)
    ui.highlight(buf, { { 0, 'KilnHeader' } })
    done(cb, nil, text)
  end
  local function from_run()
    if not nn(s.run_id) then
      return show('no output: the service has no run')
    end
    read_all(function(offset, k)
      core.call('process_output', { run_id = s.run_id, stream = 'both', offset = offset, limit = 131072 }, k)
    end, show)
  end
  if not nn(s.trace_id) then
    return from_run()
  end
  local out = {}
  local function stream(name, k)
    read_all(function(offset, kk)
      core.call('trace_output', { trace_id = s.trace_id, stream = name, offset = offset, limit = 131072 }, kk)
    end, k)
  end
  stream('stdout', function(err, text)
    if err then
      return from_run()
    end
    out[1] = text
    stream('stderr', function(eerr, etext)
      show(nil, out[1] .. (not eerr and etext or ''))
    end)
  end)
  return buf
end

--- Lists the services of the live sandboxes in kiln://services.
function M.services(cb)
  local buf = ui.scratch(NAME, 'kilnservices', {
    ['<CR>'] = { function()
      local e = under_cursor()
      if e then
        M.log(e)
      end
    end, "open the log of the service under the cursor" },
    ['R'] = { function()
      local e = under_cursor()
      if e then
        local b = vim.api.nvim_get_current_buf()
        M.restart(e.sandbox_id, e.service.name, function()
          load(b)
        end)
      end
    end, 'restart the service under the cursor' },
    ['t'] = { function()
      local e = under_cursor()
      if e and nn(e.service.trace_id) then
        traces.trace(e.service.trace_id)
      end
    end, "open the trace of the service under the cursor" },
    ['s'] = { function()
      local b = vim.api.nvim_get_current_buf()
      M.start(function()
        load(b)
      end)
    end, "start kiln.json's services" },
    ['r'] = { function()
      load(vim.api.nvim_get_current_buf())
    end, 'refresh' },
  })
  if not state.views[buf] then
    ui.set_lines(buf, 0, -1, { 'Kiln services: loading…' })
  end
  ui.show(buf)
  load(buf, cb)
  return buf
end

return M
