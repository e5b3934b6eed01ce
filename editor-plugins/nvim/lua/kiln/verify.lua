-- :Kiln verify: the workspace's checks (the verify tool), failing tests into the quickfix list.
local config = require('kiln.config')
local core = require('kiln.core')
local mcp = require('kiln.mcp')
local ui = require('kiln.ui')

local nn = mcp.nn
local levels = vim.log.levels
local state = core.state
local done = core.done

local M = {}

-- `item` with the message's first line between `prefix` and `suffix`, then one entry per further
-- line with valid = 0: the quickfix window shows them as "|| line" under their error and :cnext
-- skips them, so a multi-line assertion diff reads as the runner wrote it.
local function add_item(items, item, prefix, message, suffix)
  local lines = ui.message_lines(message)
  item.text = prefix .. (lines[1] or '') .. (suffix or '')
  items[#items + 1] = item
  for i = 2, #lines do
    items[#items + 1] = { text = lines[i], valid = 0 }
  end
end

--- Quickfix items for a verify result: one per failing test (file and line from the parsed
--- report), one per failed or broken check that has no test failures to point at; a message
--- of several lines continues in entries of its own.
function M.qf_items(res, root)
  local items = {}
  for _, check in ipairs(nn(res.checks) or {}) do
    local st = nn(check.status)
    if st ~= 'pass' and st ~= 'skipped' then
      local tests = nn(check.tests)
      local failures = type(tests) == 'table' and nn(tests.failures) or {}
      for _, f in ipairs(failures) do
        local file = nn(f.file) or ''
        local item = { lnum = nn(f.line) or 0, type = 'E' }
        if file ~= '' then
          item.filename = file:sub(1, 1) == '/' and file or (root .. '/' .. file)
        end
        add_item(items, item, string.format('%s: %s: ', check.name, nn(f.name) or '?'), nn(f.message))
      end
      if #failures == 0 then
        local why = nn(check.error)
        if not why or why == '' then
          why = string.format('exit %s, %s', tostring(nn(check.exit_code)), tostring(nn(check.stop_reason)))
        end
        add_item(items, { type = 'E' }, string.format('check %s %s: ', check.name, st), why,
          string.format(' (trace %s)', tostring(nn(check.trace_id))))
      end
    end
  end
  return items
end

--- Runs the workspace's checks (all, or those named); failures go to the quickfix list.
function M.verify(checks, cb)
  if state.verify then
    ui.notify('verify is already running (:Kiln stop cancels it)', levels.WARN)
    return done(cb, 'already running')
  end
  state.verify = true
  core.autowrite()
  core.session(function(err, s)
    if err then
      state.verify = nil
      return done(cb, err)
    end
    local args = {}
    if checks and #checks > 0 then
      args.checks = checks
    end
    core.show_progress('verify', { message = 'starting' })
    state.verify = s:call_tool('verify', args, {
      label = 'verify',
      on_progress = function(p)
        core.show_progress('verify', p)
      end,
    }, function(terr, res, info)
      state.verify = nil
      if info and info.cancelled then
        ui.notify('verify cancelled')
        return done(cb, 'cancelled', nil, info)
      end
      if terr then
        ui.notify('verify: ' .. terr, levels.ERROR)
        return done(cb, terr, res, info)
      end
      local items = M.qf_items(res, s.root or state.workspace or vim.fn.getcwd())
      local summary = nn(res.summary) or ('verify ' .. tostring(res.status))
      vim.fn.setqflist({}, ' ', { title = 'Kiln ' .. summary, items = items })
      local prev = vim.api.nvim_get_current_win()
      if res.status == 'pass' then
        ui.notify(summary, levels.INFO, true)
        if config.options.open_quickfix then
          vim.cmd('cclose')
        end
      else
        ui.notify(summary, levels.WARN, true)
        if config.options.open_quickfix and #items > 0 then
          vim.cmd('botright copen')
          if vim.api.nvim_win_is_valid(prev) then
            vim.api.nvim_set_current_win(prev)
          end
        end
      end
      state.last_verify = res
      core.fire('KilnVerifyDone')
      done(cb, nil, res, info)
    end)
  end)
end

return M
