-- Scratch buffers and windows for Kiln's output (runs, traces, the log), kept apart from the
-- MCP side so each command is only "call a tool, render its result".
local config = require('kiln.config')

local M = {}

M.ns = vim.api.nvim_create_namespace('kiln')

local hl_links = {
  KilnPass = 'DiagnosticOk',
  KilnFail = 'DiagnosticError',
  KilnRunning = 'DiagnosticWarn',
  KilnDim = 'Comment',
  KilnHeader = 'Title',
  KilnId = 'Identifier',
}

function M.define_highlights()
  for name, target in pairs(hl_links) do
    -- DiagnosticOk is 0.9+; fall back to plain groups every version has.
    if vim.fn.hlexists(target) == 0 then
      target = ({ DiagnosticOk = 'String', DiagnosticError = 'ErrorMsg', DiagnosticWarn = 'WarningMsg' })[target] or target
    end
    vim.api.nvim_set_hl(0, name, { link = target, default = true })
  end
end

-- Results arrive from the server at any time, often in the same tick as a progress message:
-- two messages without a redraw between them scroll the message area into a hit-enter prompt.
-- A redraw first makes each message replace the last, as users expect from async plugins.
local function settle()
  if vim.api.nvim_get_mode().mode ~= 'c' then
    pcall(vim.cmd, 'redraw')
  end
end

-- The message area's room before a hit-enter prompt ('ruler' and 'showcmd' take their share).
local function room()
  return math.max(20, (vim.v.echospace or (vim.o.columns - 12)) - 1)
end

local function truncate(msg)
  msg = msg:gsub('[\r\n]+', ' ')
  if vim.fn.strdisplaywidth(msg) > room() then
    msg = vim.fn.strcharpart(msg, 0, room() - 1) .. '…'
  end
  return msg
end

local builtin_notify = vim.notify

--- Tells the user something. Status lines (`brief`) are cut to what fits the message area when
--- vim.notify is Neovim's own (a notification plugin shows them whole); errors, URLs and the like
--- are never cut, and may need <Enter> in a narrow window.
function M.notify(msg, level, brief)
  msg = 'Kiln: ' .. msg
  if brief and vim.notify == builtin_notify then
    msg = truncate(msg)
  end
  settle()
  vim.notify(msg, level or vim.log.levels.INFO, { title = 'Kiln' })
end

--- A transient message (progress): cut to fit, not kept in :messages.
function M.echo(msg, hl)
  settle()
  vim.api.nvim_echo({ { truncate(msg), hl or 'None' } }, false, {})
end

--- Finds a buffer by exact name (bufnr() would treat the name as a pattern).
function M.find_buf(name)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_valid(b) and vim.api.nvim_buf_get_name(b) == name then
      return b
    end
  end
  return nil
end

--- A scratch buffer called `name` (reused when it exists), with buffer-local keys `maps`
--- ({lhs = {fn, desc}}) and `q` to close.
function M.scratch(name, filetype, maps)
  local buf = M.find_buf(name)
  if not buf then
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
    vim.bo[buf].buftype = 'nofile'
    vim.bo[buf].bufhidden = 'hide'
    vim.bo[buf].swapfile = false
    vim.bo[buf].modifiable = false
    vim.bo[buf].filetype = filetype
    vim.keymap.set('n', 'q', function()
      M.close(buf)
    end, { buffer = buf, nowait = true, desc = 'Kiln: close this window' })
  end
  for lhs, m in pairs(maps or {}) do
    vim.keymap.set('n', lhs, m[1], { buffer = buf, nowait = true, desc = 'Kiln: ' .. m[2] })
  end
  return buf
end

function M.close(buf)
  local win = vim.fn.bufwinid(buf)
  if win ~= -1 and #vim.api.nvim_list_wins() > 1 then
    vim.api.nvim_win_close(win, false)
  elseif vim.api.nvim_buf_is_valid(buf) then
    -- The only window: show another buffer rather than leaving an empty tab page.
    pcall(vim.cmd, 'bprevious')
  end
end

--- Shows `buf` in a window (an existing one when it is visible; the current one when `here`)
--- and makes that window current unless `keep_focus`.
function M.show(buf, keep_focus, here)
  local prev = vim.api.nvim_get_current_win()
  local win = vim.fn.bufwinid(buf)
  if win == -1 and here then
    win = prev
    vim.api.nvim_win_set_buf(win, buf)
  elseif win == -1 then
    vim.cmd(config.options.split)
    win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(win, buf)
    vim.wo[win].number = false
    vim.wo[win].relativenumber = false
    vim.wo[win].wrap = false
    vim.wo[win].spell = false
  elseif not keep_focus then
    vim.api.nvim_set_current_win(win)
  end
  if keep_focus and vim.api.nvim_win_is_valid(prev) then
    vim.api.nvim_set_current_win(prev)
  end
  return win
end

--- Replaces lines [first, last) of a read-only scratch buffer.
function M.set_lines(buf, first, last, lines)
  if not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, first, last, false, lines)
  vim.bo[buf].modifiable = false
end

--- Highlights whole lines: marks = { {line0, group}, ... } or {line0, group, col_start, col_end}.
function M.highlight(buf, marks)
  for _, m in ipairs(marks) do
    pcall(vim.api.nvim_buf_add_highlight, buf, M.ns, m[2], m[1], m[3] or 0, m[4] or -1)
  end
end

--- Keeps windows that show `buf` at its end while output arrives (like a terminal), except the
--- current window when its cursor has left the last line.
function M.follow(buf, was_at_end)
  local n = vim.api.nvim_buf_line_count(buf)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    if win ~= vim.api.nvim_get_current_win() or was_at_end then
      pcall(vim.api.nvim_win_set_cursor, win, { n, 0 })
    end
  end
end

function M.status_group(status)
  if status == 'pass' then
    return 'KilnPass'
  elseif status == 'running' then
    return 'KilnRunning'
  elseif status == nil or status == '' or status == 'skipped' then
    return 'KilnDim'
  end
  return 'KilnFail'
end

-- "2026-12-01T04:12:46.247Z" -> "2026-12-01 04:12:46"
function M.time(iso)
  if type(iso) ~= 'string' then
    return '-'
  end
  return (iso:gsub('T', ' '):gsub('%.%d+', ''):gsub('Z$', ''))
end

function M.duration(ms)
  if type(ms) ~= 'number' then
    return '-'
  end
  if ms < 1000 then
    return string.format('%dms', ms)
  elseif ms < 60000 then
    return string.format('%.1fs', ms / 1000)
  end
  return string.format('%dm%02ds', math.floor(ms / 60000), math.floor(ms / 1000) % 60)
end

-- "512 B", "1.5 KiB", "3.2 MiB"; "-" for anything that is not a number.
function M.bytes(n)
  if type(n) ~= 'number' then
    return '-'
  elseif n < 1024 then
    return n .. ' B'
  elseif n < 1048576 then
    return string.format('%.1f KiB', n / 1024)
  end
  return string.format('%.1f MiB', n / 1048576)
end

-- Terminal colour codes and carriage-return redraws make no sense in a buffer.
function M.clean(text)
  text = text:gsub('\27%[[%d;?]*[A-Za-z]', ''):gsub('\27%][^\7]*\7', '')
  return text
end

--- The lines of a message (CRLF as LF, trailing blanks and blank lines at either end dropped).
function M.message_lines(text)
  local lines = vim.split((text or ''):gsub('\r\n?', '\n'), '\n', { plain = true })
  for i, l in ipairs(lines) do
    lines[i] = l:gsub('%s+$', '')
  end
  while #lines > 0 and lines[1] == '' do
    table.remove(lines, 1)
  end
  while #lines > 0 and lines[#lines] == '' do
    table.remove(lines, #lines)
  end
  return lines
end

return M
