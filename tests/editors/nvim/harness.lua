-- A tiny test harness for Neovim's own Lua (no plugin dependencies): tests run one after another,
-- each in pcall; results print in node's spec style, then "N passed, M failed"; any failure, or
-- an error outside a test, exits with `cquit 1` (nvim --headless would otherwise exit 0).
local T = { tests = {}, notes = {} }

local uv = vim.uv or vim.loop

local function out(s)
  io.stdout:write(s .. '\n')
  io.stdout:flush()
end
T.out = out

function T.test(name, fn)
  table.insert(T.tests, { name = name, fn = fn })
end

function T.fail(msg)
  error(msg, 2)
end

function T.ok(cond, msg)
  if not cond then
    error('expected true: ' .. (msg or '?'), 2)
  end
  return cond
end

function T.eq(got, want, msg)
  if not vim.deep_equal(got, want) then
    error(string.format('%s: expected %s, got %s', msg or 'eq', vim.inspect(want), vim.inspect(got)), 2)
  end
end

function T.match(s, pat, msg)
  if type(s) ~= 'string' or not s:find(pat) then
    error(string.format('%s: %s does not match %q', msg or 'match', vim.inspect(s), pat), 2)
  end
end

--- Waits (processing events) until cond() is truthy; fails with `what` after `ms`.
-- The deadline is kept here too: on Neovim 0.7 a cond() that itself waits (a synchronous request)
-- can keep vim.wait from ever timing out, and a failing test then hangs the suite.
function T.wait(ms, cond, what)
  local deadline = vim.loop.hrtime() + ms * 1e6
  local ok = vim.wait(ms, function()
    if vim.loop.hrtime() > deadline then
      return true
    end
    local r = cond()
    return r ~= nil and r ~= false
  end, 20)
  if ok and vim.loop.hrtime() > deadline then
    local r = cond()
    ok = r ~= nil and r ~= false
  end
  if not ok then
    error('timed out after ' .. ms .. ' ms waiting for ' .. (what or 'a condition'), 2)
  end
end

function T.lines(buf)
  return vim.api.nvim_buf_get_lines(buf or 0, 0, -1, false)
end

function T.text(buf)
  return table.concat(T.lines(buf), '\n')
end

-- vim.notify is recorded (and still shown) so tests can check what the user was told.
local orig_notify = vim.notify
vim.notify = function(msg, level, opts)
  table.insert(T.notes, { msg = msg, level = level or vim.log.levels.INFO })
end
T.orig_notify = orig_notify

-- A prompt would wait for keys no headless test sends: every prompt is recorded and answered
-- with "" (tests that expect one replace the function for the time they need it).
T.prompts = {}
local function no_prompt(kind)
  return function(prompt)
    table.insert(T.prompts, { kind = kind, prompt = type(prompt) == 'table' and prompt.prompt or prompt })
    return ''
  end
end
vim.fn.input = no_prompt('input')
vim.fn.inputsecret = no_prompt('inputsecret')
vim.ui.input = function(opts, on_confirm)
  table.insert(T.prompts, { kind = 'ui.input', prompt = opts and opts.prompt })
  on_confirm(nil)
end

--- The first recorded notification matching `pat` (and `level` when given) since mark `from`.
function T.note(pat, level, from)
  for i = (from or 0) + 1, #T.notes do
    local n = T.notes[i]
    if n.msg:find(pat) and (level == nil or n.level == level) then
      return n
    end
  end
end

function T.mark()
  return #T.notes
end

function T.run(label)
  local passed, failed = 0, 0
  for _, t in ipairs(T.tests) do
    local t0 = uv.hrtime()
    local ok, err = xpcall(t.fn, debug.traceback)
    local ms = (uv.hrtime() - t0) / 1e6
    if ok then
      passed = passed + 1
      out(string.format('✔ %s%s (%.0fms)', label and (label .. ': ') or '', t.name, ms))
    else
      failed = failed + 1
      out(string.format('✖ %s%s (%.0fms)', label and (label .. ': ') or '', t.name, ms))
      for l in tostring(err):gmatch('[^\n]+') do
        out('    ' .. l)
      end
      local recent = {}
      for i = math.max(1, #T.notes - 4), #T.notes do
        recent[#recent + 1] = T.notes[i].msg:gsub('\n', ' | ')
      end
      if #recent > 0 then
        out('    last notifications: ' .. table.concat(recent, ' || '))
      end
    end
  end
  out(string.format('%d passed, %d failed', passed, failed))
  return failed
end

--- Runs the tests and exits Neovim: `cquit 1` on any failure or harness error, else `qall!`.
function T.main(label, teardown)
  local ok, failed = xpcall(T.run, debug.traceback, label)
  if not ok then
    out('harness error: ' .. tostring(failed))
    out('0 passed, 1 failed')
  end
  if teardown then
    local tok, terr = pcall(teardown)
    if not tok then
      out('teardown error: ' .. tostring(terr))
    end
  end
  if not ok or failed > 0 then
    vim.cmd('cquit 1')
  else
    vim.cmd('qall!')
  end
end

return T
