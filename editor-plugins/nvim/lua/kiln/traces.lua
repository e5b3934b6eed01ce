-- :Kiln traces: trace_list in a scratch buffer, trace_get for one trace; <CR> follows rows,
-- steps and file:line references.
local checkpoints = require('kiln.checkpoints')
local config = require('kiln.config')
local core = require('kiln.core')
local mcp = require('kiln.mcp')
local network = require('kiln.network')
local ui = require('kiln.ui')

local nn = mcp.nn
local levels = vim.log.levels
local state = core.state
local done = core.done

local M = {}

local function trace_row(t)
  local desc = nn(t.command) or ''
  local name = nn(t.name)
  if name and name ~= '' and not desc:find(name, 1, true) then
    desc = name .. ': ' .. desc
  end
  desc = desc:gsub('\n', ' ')
  if #desc > 70 then
    desc = desc:sub(1, 69) .. '…'
  end
  local tests = nn(t.tests)
  if type(tests) == 'table' then
    desc = string.format('%s  [%s passed, %s failed]', desc, nn(tests.passed) or 0, nn(tests.failed) or 0)
  end
  return string.format('%-11s %-7s %-19s %7s  %s  %s', t.status, t.kind, ui.time(nn(t.started_at)), ui.duration(nn(t.duration_ms)),
    t.trace_id, desc)
end

local MORE = '-- more: <CR> here loads the next page --'

local function traces_render(buf, res, append)
  local view = state.views[buf]
  local lines, marks = {}, {}
  local first
  if append then
    first = vim.api.nvim_buf_line_count(buf) - 1 -- replaces the "more" line
  else
    first = 0
    vim.api.nvim_buf_clear_namespace(buf, ui.ns, 0, -1)
    local f = view.filter
    local ws = state.session and state.session.workspace
    lines[1] = string.format('Kiln traces%s%s · %s', ws and (' of ' .. nn(ws.name)) or '',
      (f.kind or f.status) and (' (' .. table.concat(vim.tbl_values({ f.kind, f.status }), ', ') .. ')') or '',
      '<CR> open · r refresh · q close')
    lines[2] = string.format('%-11s %-7s %-19s %7s  %-19s  %s', 'STATUS', 'KIND', 'STARTED (UTC)', 'TIME', 'TRACE', 'COMMAND')
    marks = { { 0, 'KilnHeader' }, { 1, 'KilnDim' } }
  end
  for _, t in ipairs(nn(res.traces) or {}) do
    lines[#lines + 1] = trace_row(t)
    marks[#marks + 1] = { first + #lines - 1, ui.status_group(t.status), 0, 11 }
  end
  if not append and #(nn(res.traces) or {}) == 0 then
    lines[#lines + 1] = '(no traces yet: :Kiln run or :Kiln verify leave one)'
  end
  view.next_cursor = nn(res.next_cursor) or ''
  if view.next_cursor ~= '' then
    lines[#lines + 1] = MORE
    marks[#marks + 1] = { first + #lines - 1, 'KilnDim' }
  end
  ui.set_lines(buf, first, -1, lines)
  ui.highlight(buf, marks)
end

local function traces_load(buf, append, cb)
  local view = state.views[buf]
  local args = { kind = view.filter.kind, status = view.filter.status, limit = config.options.traces_limit }
  if append then
    args.cursor = view.next_cursor
  end
  core.call('trace_list', args, function(err, res)
    if err then
      ui.notify('trace_list: ' .. err, levels.ERROR)
      return done(cb, err)
    end
    traces_render(buf, res, append)
    done(cb, nil, res)
  end)
end

local function open_under_cursor()
  local line = vim.api.nvim_get_current_line()
  local buf = vim.api.nvim_get_current_buf()
  if line == MORE and state.views[buf] then
    return traces_load(buf, true)
  end
  -- A file the run changed ("  M path" under "changed"): the diff split.
  local trace_id = vim.api.nvim_buf_get_name(buf):match('^kiln://trace/(tr_%w+)$')
  local rows = trace_id and state.views[buf] and state.views[buf].changed_rows
  local changed_path = rows and rows[vim.api.nvim_win_get_cursor(0)[1]]
  if changed_path then
    return M.open_change(trace_id, changed_path)
  end
  local id = line:match('(tr_[%w]+)')
  if id then
    -- From a Kiln list, the trace replaces it in this window (<C-o> or :b# goes back).
    return M.trace(id, nil, vim.api.nvim_buf_get_name(buf):match('^kiln://trace') ~= nil)
  end
  -- A failing test's file:line in a trace: open it in the previous window.
  local file, lnum = line:match('([%w%._/%-]+%.[%w]+):(%d+)')
  local root = (state.session and state.session.root) or state.workspace or vim.fn.getcwd()
  if file then
    local path = file:sub(1, 1) == '/' and file or (root .. '/' .. file)
    if vim.fn.filereadable(path) == 1 then
      vim.cmd('wincmd p')
      vim.cmd('edit +' .. lnum .. ' ' .. vim.fn.fnameescape(path))
      return
    end
  end
  ui.notify('nothing to open on this line')
end

--- Lists traces (newest first) in a scratch buffer; filter = {kind=, status=}.
function M.traces(filter, cb)
  filter = filter or {}
  local buf = ui.scratch('kiln://traces', 'kilntraces', {
    ['<CR>'] = { open_under_cursor, 'open the trace under the cursor' },
    ['r'] = { function()
      traces_load(vim.api.nvim_get_current_buf(), false)
    end, 'refresh' },
  })
  state.views[buf] = { filter = filter, next_cursor = '' }
  ui.set_lines(buf, 0, -1, { 'Kiln traces: loading…' })
  ui.show(buf)
  traces_load(buf, false, cb)
  return buf
end

local function scalar(v)
  v = nn(v)
  local t = type(v)
  return t == 'string' or t == 'number' or t == 'boolean'
end

local function trace_lines(res)
  local t = nn(res.trace) or {}
  local L, marks, changed_rows = {}, {}, {}
  local function add(s, group)
    L[#L + 1] = s
    if group then
      marks[#marks + 1] = { #L - 1, group }
    end
  end
  local function field(k, v)
    if v ~= nil and v ~= '' then
      add(string.format('%-10s %s', k, v))
    end
  end
  add(string.format('Trace %s · %s · %s   (<CR> opens the trace or file under the cursor · r refresh · q close)',
    nn(t.id) or '?', nn(t.kind) or '?', nn(t.status) or '?'), ui.status_group(nn(t.status)))
  -- What happened first (command, outcome, tests, steps), then where and how it ran.
  field('name', nn(t.name))
  field('command', nn(t.command))
  field('started', string.format('%s · took %s%s', ui.time(nn(t.started_at)), ui.duration(nn(t.duration_ms)),
    nn(t.ended_at) and '' or ' (still running)'))
  field('exit', string.format('code %s · stop_reason %s · signal %s', tostring(nn(t.exit_code) or '-'), tostring(nn(t.stop_reason) or '-'),
    tostring(nn(t.signal) or '-')))
  if nn(t.error) and t.error ~= '' then
    add(string.format('%-10s %s', 'error', t.error), 'KilnFail')
  end
  local tests = nn(t.tests)
  if type(tests) == 'table' then
    add(string.format('tests      %s passed, %s failed, %s skipped', nn(tests.passed) or 0, nn(tests.failed) or 0, nn(tests.skipped) or 0),
      (nn(tests.failed) or 0) > 0 and 'KilnFail' or 'KilnPass')
    for _, f in ipairs(nn(tests.failures) or {}) do
      local where = nn(f.file) or ''
      if nn(f.line) then
        where = where .. ':' .. f.line
      end
      add(string.format('  ✖ %s  %s', nn(f.name) or '?', where), 'KilnFail')
      for _, l in ipairs(ui.message_lines(nn(f.message))) do
        add(l == '' and '' or '      ' .. l)
      end
    end
  end
  -- A run with a network allowlist: what it reached, and first what was refused (and what to add).
  local net = network.view(t)
  if net then
    add(string.format('%-10s %s', 'network', net.summary), net.refused > 0 and 'KilnFail' or nil)
    for _, l in ipairs(network.lines(net, '  ', nn(t.id))) do
      add(l[1], l[2])
    end
  end
  -- What the run changed in the workspace (checkpoints before and after it).
  local changed = checkpoints.summary(t.changes)
  if changed then
    add(string.format('%-10s %s · :Kiln changes %s (or <CR> on a file) compares them', 'changed', changed, nn(t.id) or ''), 'KilnHeader')
    for _, p in ipairs(nn(t.changes.paths) or {}) do
      add(string.format('  %s %s', ({ added = 'A', modified = 'M', deleted = 'D' })[p.change] or '?', p.path))
      changed_rows[#L] = p.path
    end
    if nn(t.changes.paths_truncated) then
      add('  … (:Kiln changes lists them all)', 'KilnDim')
    end
  end
  local children = nn(res.children) or {}
  if #children > 0 then
    add('steps', 'KilnHeader')
    for _, c in ipairs(children) do
      add('  ' .. trace_row(c))
      marks[#marks + 1] = { #L - 1, ui.status_group(c.status), 2, 13 }
    end
  end
  add('')
  field('cwd', nn(t.cwd))
  field('workspace', nn(t.workspace_id) or nn(t.workspace))
  if nn(t.parent_id) then
    field('parent', t.parent_id)
  end
  local client = nn(t.client)
  if type(client) == 'table' then
    field('client', string.format('%s %s', nn(client.name) or '?', nn(client.version) or ''))
  end
  local policy = nn(t.policy)
  if type(policy) == 'table' then
    local lim = {}
    for k, v in pairs(nn(policy.limits) or {}) do
      lim[#lim + 1] = k .. '=' .. tostring(nn(v))
    end
    table.sort(lim)
    field('policy', string.format('network %s · isolation %s · %s', network.policy_text(nn(policy.network)), tostring(nn(policy.isolation)),
      table.concat(lim, ' ')))
  end
  local r = nn(t.resources)
  if type(r) == 'table' then
    field('resources', string.format('peak memory %s · user %s · sys %s', ui.bytes(nn(r.peak_memory_bytes)), ui.duration(nn(r.user_ms)),
      ui.duration(nn(r.sys_ms))))
  end
  local result = nn(t.result)
  if type(result) == 'table' then
    local keys = vim.tbl_keys(result)
    table.sort(keys)
    for _, k in ipairs(keys) do
      if scalar(result[k]) and k ~= 'status' then
        field(k, tostring(result[k]))
      end
    end
  end
  for _, stream in ipairs({ 'stdout', 'stderr' }) do
    local tail = nn(res[stream .. '_tail'])
    if type(tail) == 'string' and tail ~= '' then
      add('')
      add(string.format('%s (last part, %s in all)', stream, ui.bytes(nn(res[stream .. '_total_bytes']))), 'KilnHeader')
      for _, l in ipairs(vim.split(ui.clean(tail):gsub('\n$', ''), '\n', { plain = true })) do
        add('  ' .. l:gsub('\r', ''))
      end
    end
  end
  if nn(res.how_to_page) then
    add('')
    add('full output: ' .. res.how_to_page, 'KilnDim')
  end
  return L, marks, changed_rows
end

--- Opens the diff split of one file run `trace_id` changed.
function M.open_change(trace_id, rel, cb)
  core.call('trace_get', { trace_id = trace_id }, function(err, res)
    local ch = not err and nn(nn(res.trace) and res.trace.changes)
    if type(ch) ~= 'table' or not nn(ch.checkpoint_before) then
      ui.notify('run ' .. trace_id .. ' has no checkpoints', levels.ERROR)
      return done(cb, err or 'no checkpoints')
    end
    checkpoints.open_diff(ch.checkpoint_before, ch.checkpoint_after, rel, cb, 'changed by ' .. trace_id)
  end)
end

--- Shows one trace (trace_get) in a scratch buffer (in the current window when `here`).
function M.trace(id, cb, here)
  local name = 'kiln://trace/' .. id
  local buf = ui.scratch(name, 'kilntrace', {
    ['<CR>'] = { open_under_cursor, 'open the trace or file under the cursor' },
    ['r'] = { function()
      M.trace(id)
    end, 'refresh' },
  })
  if vim.api.nvim_buf_line_count(buf) <= 1 then
    ui.set_lines(buf, 0, -1, { 'Trace ' .. id .. ': loading…' })
  end
  ui.show(buf, false, here)
  core.call('trace_get', { trace_id = id }, function(err, res)
    if err then
      ui.set_lines(buf, 0, -1, { 'Trace ' .. id .. ': ' .. err })
      ui.notify('trace_get: ' .. err, levels.ERROR)
      return done(cb, err)
    end
    local lines, marks, changed_rows = trace_lines(res)
    state.views[buf] = { changed_rows = changed_rows }
    vim.api.nvim_buf_clear_namespace(buf, ui.ns, 0, -1)
    ui.set_lines(buf, 0, -1, lines)
    ui.highlight(buf, marks)
    done(cb, nil, res)
  end)
  return buf
end

return M
