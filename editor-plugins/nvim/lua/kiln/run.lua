-- :Kiln run: a shell command in a fresh sandbox (sandbox_exec), its output streamed from
-- notifications/progress into a scratch buffer, <C-c> there cancels it.
local config = require('kiln.config')
local checkpoints = require('kiln.checkpoints')
local core = require('kiln.core')
local mcp = require('kiln.mcp')
local network = require('kiln.network')
local ui = require('kiln.ui')

local nn = mcp.nn
local state = core.state
local done = core.done

local M = {}

local function run_write(run, text)
  local buf = run.buf
  if not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  local at_end = vim.api.nvim_get_current_buf() == buf
    and vim.api.nvim_win_get_cursor(0)[1] == vim.api.nvim_buf_line_count(buf)
  local combined = run.pending .. ui.clean(text)
  local lines = vim.split(combined, '\n', { plain = true })
  run.pending = table.remove(lines)
  for i, l in ipairs(lines) do
    lines[i] = l:gsub('\r$', ''):match('[^\r]*$')
  end
  local shown = vim.deepcopy(lines)
  shown[#shown + 1] = run.pending:match('[^\r]*$')
  ui.set_lines(buf, run.done, -1, shown)
  run.done = run.done + #lines
  ui.follow(buf, at_end)
end

-- The run's last lines: `before` ({text, group} pairs: the network log), then the footer.
local function run_footer(run, text, group, before)
  if not vim.api.nvim_buf_is_valid(run.buf) then
    return
  end
  local tail = {}
  if run.pending ~= '' then
    tail[1] = run.pending:match('[^\r]*$')
  end
  local marks = {}
  for _, l in ipairs(before or {}) do
    tail[#tail + 1] = l[1]
    if l[2] then
      marks[#marks + 1] = { run.done + #tail - 1, l[2] }
    end
  end
  tail[#tail + 1] = text
  ui.set_lines(run.buf, run.done, -1, tail)
  local last = vim.api.nvim_buf_line_count(run.buf) - 1
  marks[#marks + 1] = { last, group }
  ui.highlight(run.buf, marks)
  ui.follow(run.buf, false)
end

--- Runs `cmd` (a shell command line) in a fresh sandbox; output streams into a scratch buffer.
--- Returns the run ({n, buf}); cb(err, result, info) when it ends.
function M.run(cmd, cb)
  if not cmd or cmd:match('^%s*$') then
    vim.ui.input({ prompt = 'Kiln run: ', completion = 'shellcmd' }, function(input)
      if input and not input:match('^%s*$') then
        M.run(input, cb)
      end
    end)
    return nil
  end
  core.autowrite()
  state.run_seq = state.run_seq + 1
  local n = state.run_seq
  local run = { n = n, cmd = cmd, pending = '', done = 1, chunks = 0, streamed = 0 }
  run.buf = ui.scratch('kiln://run/' .. n, 'kilnrun', {
    ['<C-c>'] = { function()
      M.stop_run(n)
    end, 'cancel this run' },
  })
  ui.set_lines(run.buf, 0, -1, { '$ ' .. cmd, '' })
  ui.highlight(run.buf, { { 0, 'KilnHeader' } })
  local win = ui.show(run.buf)
  -- The cursor on the last line: the window follows the output until the user moves away.
  pcall(vim.api.nvim_win_set_cursor, win, { 2, 0 })
  state.runs[n] = run
  core.session(function(err, s)
    if err then
      run_footer(run, '[not run: ' .. err .. ']', 'KilnFail')
      return done(cb, err)
    end
    local args = { command = cmd }
    if config.options.run_timeout_s then
      args.timeout_s = config.options.run_timeout_s
    end
    run.handle = s:call_tool('sandbox_exec', args, {
      label = 'run ' .. n .. ': ' .. cmd,
      on_progress = function(p)
        local msg = nn(p.message)
        if type(msg) == 'string' and msg ~= '' then
          run.chunks = run.chunks + 1
          run.streamed = run.streamed + #msg
          run_write(run, msg)
        end
      end,
    }, function(terr, res, info)
      run.handle = nil
      run.result = res
      if info and info.cancelled then
        run_footer(run, '[cancelled]', 'KilnFail')
        return done(cb, 'cancelled', nil, info)
      end
      if terr then
        run_footer(run, '[error: ' .. terr:gsub('\n', ' ') .. ']', 'KilnFail')
        return done(cb, terr, res, info)
      end
      local function finish(trace)
        M._finish(run, res, trace)
        state.last_run = res
        core.fire('KilnRunDone')
        done(cb, nil, res, info)
      end
      -- The trace has what the run changed (checkpoints before and after) and, with a network
      -- allowlist (kiln.json sandbox.network), the network log; the result has neither.
      if nn(res and res.trace_id) then
        return core.call('trace_get', { trace_id = res.trace_id }, function(gerr, got)
          finish(not gerr and type(got) == 'table' and nn(got.trace) or nil)
        end)
      end
      finish(nil)
    end)
  end)
  return run
end

--- Ends a run's buffer with its result: the output (from the result's tails when streaming
--- missed some of it), the network log of its `trace` (trace_get's, when it had an allowlist) and
--- a footer with exit code, stop reason, time and trace.
function M._finish(run, res, trace)
  local total = (nn(res.stdout_total_bytes) or 0) + (nn(res.stderr_total_bytes) or 0)
  local truncated = nn(res.stdout_truncated) or nn(res.stderr_truncated)
  if run.streamed < total and not truncated then
    -- Progress notifications are best effort: when they did not carry all of it, the result's
    -- tails (complete here) replace them, stdout first, then stderr.
    local out, err = nn(res.stdout) or '', nn(res.stderr) or ''
    if out ~= '' and err ~= '' and out:sub(-1) ~= '\n' then
      out = out .. '\n'
    end
    run.pending, run.done = '', 1
    ui.set_lines(run.buf, 1, -1, { '' })
    if out .. err ~= '' then
      run_write(run, out .. err)
    end
  end
  local code, signal = nn(res.exit_code), nn(res.signal)
  local parts = { code and ('exit ' .. code) or ('signal ' .. tostring(signal)) }
  if nn(res.stop_reason) and res.stop_reason ~= 'exit' then
    parts[#parts + 1] = res.stop_reason
  end
  parts[#parts + 1] = ui.duration(nn(res.duration_ms) and math.floor(res.duration_ms))
  if truncated then
    parts[#parts + 1] = 'output truncated: see the trace'
  end
  parts[#parts + 1] = 'trace ' .. (nn(res.trace_id) or '-')
  local net = nn(res.isolation) and nn(res.isolation.egress) and network.view(trace) or nil
  local extra = {}
  local changed, n = checkpoints.summary(trace and trace.changes)
  if changed then
    parts[#parts] = parts[#parts] .. ' · ' .. n .. ' changed'
    local names = {}
    for i, p in ipairs(nn(trace.changes.paths) or {}) do
      if i > 10 then
        names[#names + 1] = '…'
        break
      end
      names[#names + 1] = ({ added = 'A', modified = 'M', deleted = 'D' })[p.change] .. ' ' .. p.path
    end
    extra[1] = { 'changed: ' .. changed .. ': ' .. table.concat(names, ', ') .. ' · :Kiln changes ' .. tostring(nn(res.trace_id)), 'KilnDim' }
  end
  if net then
    extra[#extra + 1] = { 'network: ' .. net.summary, net.refused > 0 and 'KilnFail' or 'KilnDim' }
    vim.list_extend(extra, network.lines(net, '  ', nn(res.trace_id)))
  end
  run_footer(run, '[' .. table.concat(parts, ' · ') .. ']', code == 0 and 'KilnPass' or 'KilnFail', extra)
end

--- Cancels run n (from its buffer's <C-c>).
function M.stop_run(n)
  local run = state.runs[n]
  if run and run.handle then
    run.handle:cancel('cancelled from Neovim')
    return true
  end
  ui.notify('this run is not running')
  return false
end

return M
