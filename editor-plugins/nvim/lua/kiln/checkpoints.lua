-- What a run changed, and checkpoints: :Kiln changes [TRACE] lists the files a run changed
-- (checkpoint_diff between its trace's checkpoint_before and checkpoint_after); <CR> on one opens
-- a vertical diff split in a new tab page: the file before the run in a scratch buffer on the
-- left, the file itself on the right when it is still as the run left it (else the run's version,
-- read-only). :Kiln checkpoints lists checkpoint_list; :Kiln restore ID restores one after a dry
-- run and a confirmation, and names the checkpoint that undoes it.
--
-- Kiln has no tool that reads a file at a checkpoint: the file as checkpoint CP had it is the file
-- now with checkpoint_diff {from: CP, path} (CP to now) undone, checked against the SHA-256 Kiln
-- reports for CP's side.
local core = require('kiln.core')
local mcp = require('kiln.mcp')
local ui = require('kiln.ui')

local nn = mcp.nn
local levels = vim.log.levels
local state = core.state
local done = core.done
local uv = vim.uv or vim.loop

local M = {}

-- Unified diffs undone ------------------------------------------------------------------------

--- Lines keeping their '\n' (a last line without one stays without).
local function split_keep(text)
  local out, pos = {}, 1
  while pos <= #text do
    local nl = text:find('\n', pos, true)
    local e = nl or #text
    out[#out + 1] = text:sub(pos, e)
    pos = e + 1
  end
  return out
end

--- The hunks of a unified diff as Kiln writes them; nil, err when it is not one or is cut short.
function M.parse_hunks(diff)
  local hunks, cur = {}, nil
  for _, l in ipairs(split_keep(diff)) do
    local os_, oc, ns, nc = l:match('^@@ %-(%d+),?(%d*) %+(%d+),?(%d*) @@')
    if os_ then
      cur = { old_start = tonumber(os_), old_count = oc == '' and 1 or tonumber(oc), new_start = tonumber(ns),
        new_count = nc == '' and 1 or tonumber(nc), lines = {} }
      hunks[#hunks + 1] = cur
    elseif not cur and (l:sub(1, 4) == '--- ' or l:sub(1, 4) == '+++ ') then
      -- the file header
    elseif not cur then
      return nil, 'not a unified diff'
    elseif l:sub(1, 1) == '\\' then
      -- "\ No newline at end of file": the line before has no '\n' of its own.
      local prev = cur.lines[#cur.lines]
      if prev and prev.text:sub(-1) == '\n' then
        prev.text = prev.text:sub(1, -2)
      end
    else
      local kind = l:sub(1, 1)
      if kind ~= ' ' and kind ~= '-' and kind ~= '+' then
        return nil, 'bad diff line ' .. vim.inspect(l:sub(1, 40))
      end
      cur.lines[#cur.lines + 1] = { kind = kind, text = l:sub(2) }
    end
  end
  for _, h in ipairs(hunks) do
    local olds, news = 0, 0
    for _, x in ipairs(h.lines) do
      olds = olds + (x.kind ~= '+' and 1 or 0)
      news = news + (x.kind ~= '-' and 1 or 0)
    end
    if olds ~= h.old_count or news ~= h.new_count then
      return nil, 'a hunk is cut short (the diff was truncated?)'
    end
  end
  return hunks
end

--- The text before `diff` was applied, given the text after it; nil, err when they do not fit.
function M.reverse_apply(after, diff)
  if diff == nil or diff == '' then
    return after
  end
  local hunks, err = M.parse_hunks(diff)
  if not hunks then
    return nil, err
  end
  local lines, out, at = split_keep(after), {}, 0 -- at: lines of `after` copied so far
  for _, h in ipairs(hunks) do
    local start = h.new_count == 0 and h.new_start or h.new_start - 1
    if start < at or start > #lines then
      return nil, 'the diff does not fit the file (it changed meanwhile?)'
    end
    for i = at + 1, start do
      out[#out + 1] = lines[i]
    end
    at = start
    for _, l in ipairs(h.lines) do
      if l.kind == '-' then
        out[#out + 1] = l.text
      else
        if lines[at + 1] ~= l.text then
          return nil, string.format('the diff does not fit the file at line %d (it changed meanwhile?)', at + 1)
        end
        if l.kind == ' ' then
          out[#out + 1] = l.text
        end
        at = at + 1
      end
    end
  end
  for i = at + 1, #lines do
    out[#out + 1] = lines[i]
  end
  return table.concat(out)
end

-- Files at a checkpoint ---------------------------------------------------------------------------

function M.root()
  return (state.session and state.session.root) or state.workspace or vim.fn.getcwd()
end

--- The file as it is now: its text (a link: its target), or nil when there is none.
local function read_now(rel)
  local file = M.root() .. '/' .. rel
  local st = uv.fs_lstat(file)
  if not st then
    return nil
  end
  if st.type == 'link' then
    return uv.fs_readlink(file)
  elseif st.type ~= 'file' then
    return nil
  end
  local f = io.open(file, 'rb')
  if not f then
    return nil
  end
  local text = f:read('*a')
  f:close()
  return text
end

--- Every change from `from` to `to` (nil: the files now), all pages; `only` keeps one exact path.
--- cb(err, changes)
function M.diff_all(from, to, only, cb)
  local out = {}
  local function page(offset)
    local args = { from = from, offset = offset, limit = 500, to = to, path = only }
    core.call('checkpoint_diff', args, function(err, res)
      if err then
        return cb(err)
      end
      for _, c in ipairs(nn(res.changes) or {}) do
        if not only or c.path == only then
          out[#out + 1] = c
        end
      end
      local nxt = nn(res.next_offset)
      if nn(res.truncated) and type(nxt) == 'number' and nxt > offset then
        return page(nxt)
      end
      cb(nil, out)
    end)
  end
  page(0)
end

--- The file `rel` as checkpoint `cp` recorded it. cb(err, text|nil): nil text = not in the checkpoint.
function M.file_at(cp, rel, cb, attempt)
  attempt = attempt or 1
  local now = read_now(rel)
  local function retry(why)
    if attempt >= 3 then
      return cb(string.format('cannot show %s as %s had it: %s', rel, cp, why))
    end
    M.file_at(cp, rel, cb, attempt + 1)
  end
  M.diff_all(cp, nil, rel, function(err, list)
    if err then
      return cb(err)
    end
    local c = list[1]
    if not c then
      -- Unchanged since the checkpoint (or never there and still not there).
      if read_now(rel) ~= now then
        return retry(rel .. ' changed while it was read')
      end
      return cb(nil, now)
    end
    if c.change == 'added' then
      return cb(nil, nil)
    end
    if nn(c.binary) or type(nn(c.diff)) ~= 'string' then
      return cb(string.format('%s is binary or over 1 MiB: Kiln compares it by size and SHA-256 only', rel))
    end
    if nn(c.diff_truncated) then
      return cb('the diff of ' .. rel .. ' is too large to show')
    end
    local sha_after, sha_before = nn(c.sha256_after), nn(c.sha256_before)
    if now and sha_after and vim.fn.sha256(now) ~= sha_after then
      return retry(rel .. ' changed while it was read')
    end
    local text, perr = M.reverse_apply(now or '', c.diff)
    if not text then
      return retry(perr)
    end
    if sha_before and nn(c.type_before) ~= 'symlink' and vim.fn.sha256(text) ~= sha_before then
      return retry("the reconstructed file does not match the checkpoint's SHA-256")
    end
    cb(nil, text)
  end)
end

-- The diff split ----------------------------------------------------------------------------------

local function text_lines(text)
  local lines = vim.split(text or '', '\n', { plain = true })
  local eol = text ~= nil and text ~= '' and text:sub(-1) == '\n'
  if eol or text == nil or text == '' then
    table.remove(lines) -- the empty string after the last '\n'
  end
  return lines, eol or text == nil or text == ''
end

local function filetype_of(rel)
  if vim.filetype and vim.filetype.match then
    local ok, ft = pcall(vim.filetype.match, { filename = rel })
    if ok and type(ft) == 'string' then
      return ft
    end
  end
  return ''
end

--- A read-only scratch buffer kiln://checkpoint/CP/PATH holding `text` (nil: the file was not there).
local function checkpoint_buf(cp, rel, text, ft)
  local name = 'kiln://checkpoint/' .. cp .. '/' .. rel
  local buf = ui.find_buf(name)
  if buf then
    pcall(vim.cmd, 'diffoff!') -- (a window of it from an earlier diff keeps diff mode otherwise)
  else
    buf = vim.api.nvim_create_buf(false, true)
    vim.api.nvim_buf_set_name(buf, name)
    vim.bo[buf].buftype = 'nofile'
    vim.bo[buf].bufhidden = 'wipe'
    vim.bo[buf].swapfile = false
  end
  local lines, eol = text_lines(text)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].eol = eol
  vim.bo[buf].fixeol = false
  vim.bo[buf].modifiable = false
  vim.bo[buf].modified = false
  if ft and ft ~= '' then
    vim.bo[buf].filetype = ft
  end
  vim.keymap.set('n', 'q', function()
    pcall(vim.cmd, 'tabclose')
  end, { buffer = buf, nowait = true, desc = 'Kiln: close this diff' })
  vim.b[buf].kiln_checkpoint = { checkpoint_id = cp, path = rel, exists = text ~= nil }
  return buf
end

--- Opens `rel` as it was at `from` against `to` (nil: now) in a vertical diff split in a new tab
--- page. cb(err, {left = buf, right = buf, right_is_file = bool})
function M.open_diff(from, to, rel, cb, what)
  M.file_at(from, rel, function(err, before)
    if err then
      ui.notify(err, levels.ERROR)
      return done(cb, err)
    end
    local show_ = function(right_file, after)
      vim.cmd('tabnew')
      local right
      if right_file then
        vim.cmd('edit ' .. vim.fn.fnameescape(M.root() .. '/' .. rel))
        right = vim.api.nvim_get_current_buf()
      else
        right = checkpoint_buf(to, rel, after, filetype_of(rel))
        vim.api.nvim_win_set_buf(0, right)
      end
      local ft = vim.bo[right].filetype
      local left = checkpoint_buf(from, rel, before, ft ~= '' and ft or filetype_of(rel))
      vim.cmd('diffthis')
      vim.cmd('leftabove vsplit')
      vim.api.nvim_win_set_buf(0, left)
      vim.cmd('diffthis')
      ui.notify(string.format('%s%s: before (left) · %s (right) · q closes', rel, what and (' ' .. what) or '',
        right_file and 'the file now' or ('as ' .. (to or 'now') .. ' had it')), nil, true)
      done(cb, nil, { left = left, right = right, right_is_file = right_file })
    end
    local function show(right_file, after)
      local ok, e = pcall(show_, right_file, after)
      if not ok then
        ui.notify('the diff split: ' .. tostring(e), levels.ERROR)
        done(cb, tostring(e))
      end
    end
    if not to then
      return show(read_now(rel) ~= nil, nil)
    end
    -- Still as `to` left it: the file itself, so it can be edited there.
    M.diff_all(to, nil, rel, function(derr, since)
      if not derr and #since == 0 and read_now(rel) ~= nil then
        return show(true)
      end
      M.file_at(to, rel, function(aerr, after)
        if aerr then
          ui.notify(aerr, levels.ERROR)
          return done(cb, aerr)
        end
        show(false, after)
      end)
    end)
  end)
end

-- :Kiln changes -------------------------------------------------------------------------------------

local SIGN = { added = 'A', modified = 'M', deleted = 'D' }

local function size(n)
  return ui.bytes(nn(n))
end

function M.change_row(c)
  local sizes = c.change == 'added' and size(c.size_after) or c.change == 'deleted' and size(c.size_before)
    or (size(c.size_before) .. ' → ' .. size(c.size_after))
  return string.format('%s  %-50s %s%s', SIGN[c.change] or '?', c.path, sizes, nn(c.binary) and ' · binary' or '')
end

--- "3 files (1 added, 1 modified, 1 deleted)" for a trace's changes; nil when none.
function M.summary(ch)
  ch = nn(ch)
  if type(ch) ~= 'table' then
    return nil
  end
  local n = (nn(ch.added) or 0) + (nn(ch.modified) or 0) + (nn(ch.deleted) or 0)
  if n == 0 then
    return nil
  end
  return string.format('%d file%s (%d added, %d modified, %d deleted)', n, n == 1 and '' or 's', nn(ch.added) or 0,
    nn(ch.modified) or 0, nn(ch.deleted) or 0), n
end

local function row_path(buf, line)
  local view = state.views[buf]
  local c = view and view.rows and view.rows[line]
  return c, view
end

local function open_under_cursor()
  local buf = vim.api.nvim_get_current_buf()
  local c, view = row_path(buf, vim.api.nvim_win_get_cursor(0)[1])
  if not c then
    return ui.notify('no changed file on this line')
  end
  if nn(c.binary) or type(nn(c.diff)) ~= 'string' then
    return ui.notify(string.format('%s is binary or over 1 MiB: SHA-256 %s → %s', c.path, tostring(nn(c.sha256_before) or '-'):sub(1, 12),
      tostring(nn(c.sha256_after) or '-'):sub(1, 12)))
  end
  M.open_diff(view.from, view.to, c.path, nil, view.what)
end

--- Shows changes from checkpoint `from` to `to` (nil: now) in kiln://changes/NAME; <CR> diffs one.
local function show_changes(name, title, from, to, what, cb)
  local buf = ui.scratch('kiln://changes/' .. name, 'kilnchanges', {
    ['<CR>'] = { open_under_cursor, 'compare the file under the cursor before and after' },
  })
  state.views[buf] = { from = from, to = to, rows = {}, what = what }
  ui.set_lines(buf, 0, -1, { title .. ': loading…' })
  ui.show(buf)
  M.diff_all(from, to, nil, function(err, list)
    if err then
      ui.set_lines(buf, 0, -1, { title .. ': ' .. err })
      ui.notify('checkpoint_diff: ' .. err, levels.ERROR)
      return done(cb, err)
    end
    local lines = { string.format('%s · %d changed · <CR> diff · q close', title, #list) }
    local marks, rows = { { 0, 'KilnHeader' } }, {}
    for _, c in ipairs(list) do
      lines[#lines + 1] = M.change_row(c)
      rows[#lines] = c
      marks[#marks + 1] = { #lines - 1, c.change == 'deleted' and 'KilnFail' or c.change == 'added' and 'KilnPass' or 'KilnRunning', 0, 1 }
    end
    if #list == 0 then
      lines[#lines + 1] = '(no files changed)'
    end
    state.views[buf].rows = rows
    vim.api.nvim_buf_clear_namespace(buf, ui.ns, 0, -1)
    ui.set_lines(buf, 0, -1, lines)
    ui.highlight(buf, marks)
    if #list > 0 then
      pcall(vim.api.nvim_win_set_cursor, vim.fn.bufwinid(buf), { 2, 0 })
    end
    done(cb, nil, list, buf)
  end)
  return buf
end

--- The newest command run or verify that changed files (the last :Kiln run first). cb(err, trace_id)
local function latest_changed(cb)
  local last = state.last_run and nn(state.last_run.trace_id)
  core.call('trace_list', { limit = 20 }, function(err, res)
    if err then
      return cb(err)
    end
    local ids = {}
    if last then
      ids[1] = last
    end
    for _, t in ipairs(nn(res.traces) or {}) do
      if (t.kind == 'exec' or t.kind == 'verify') and not nn(t.parent_id) and t.trace_id ~= last then
        ids[#ids + 1] = t.trace_id
      end
    end
    local function try(i)
      if i > #ids then
        return cb('none of the recent runs changed a file')
      end
      core.call('trace_get', { trace_id = ids[i] }, function(gerr, got)
        if not gerr and M.summary(nn(got.trace) and got.trace.changes) then
          return cb(nil, ids[i])
        end
        try(i + 1)
      end)
    end
    try(1)
  end)
end

--- :Kiln changes [TRACE]: the files run TRACE changed (default: the newest run that changed some).
--- cb(err, changes, buf)
function M.changes(trace_id, cb)
  if not trace_id or trace_id == '' then
    return latest_changed(function(err, id)
      if err then
        ui.notify(err)
        return done(cb, err)
      end
      M.changes(id, cb)
    end)
  end
  core.call('trace_get', { trace_id = trace_id }, function(err, res)
    if err then
      ui.notify('trace_get: ' .. err, levels.ERROR)
      return done(cb, err)
    end
    local ch = nn(nn(res.trace) and res.trace.changes)
    if type(ch) ~= 'table' or not nn(ch.checkpoint_before) or not nn(ch.checkpoint_after) then
      local msg = string.format('run %s has no checkpoints (kiln.json "checkpoints": {"auto": false}, or not a command or verify)', trace_id)
      ui.notify(msg)
      return done(cb, msg)
    end
    local t = res.trace
    local what = nn(t.command) or nn(t.kind) or ''
    show_changes(trace_id, string.format('Kiln changes of %s (%s)', trace_id, #what > 50 and (what:sub(1, 49) .. '…') or what),
      ch.checkpoint_before, ch.checkpoint_after, 'changed by ' .. trace_id, cb)
  end)
end

--- The changes since checkpoint `cp` (to the files now).
function M.since(cp, cb)
  return show_changes(cp, 'Kiln changes since ' .. cp, cp, nil, 'since ' .. cp, cb)
end

-- :Kiln checkpoints / :Kiln restore ------------------------------------------------------------------

local function checkpoint_under_cursor()
  return vim.api.nvim_get_current_line():match('^(cp_[%w_%-]+)')
end

--- :Kiln checkpoints: checkpoint_list, newest first. <CR> shows what changed since one, R restores it.
function M.checkpoints(cb)
  local buf = ui.scratch('kiln://checkpoints', 'kilncheckpoints', {
    ['<CR>'] = { function()
      local id = checkpoint_under_cursor()
      if id then
        M.since(id)
      end
    end, 'what changed since the checkpoint under the cursor' },
    ['R'] = { function()
      local id = checkpoint_under_cursor()
      if id then
        M.restore(id)
      end
    end, 'restore the checkpoint under the cursor' },
    ['r'] = { function()
      M.checkpoints()
    end, 'refresh' },
  })
  ui.set_lines(buf, 0, -1, { 'Kiln checkpoints: loading…' })
  ui.show(buf)
  core.call('checkpoint_list', { limit = 200 }, function(err, res)
    if err then
      ui.set_lines(buf, 0, -1, { 'Kiln checkpoints: ' .. err })
      ui.notify('checkpoint_list: ' .. err, levels.ERROR)
      return done(cb, err)
    end
    local list = nn(res.checkpoints) or {}
    local lines = {
      'Kiln checkpoints (newest first) · <CR> changes since · R restore · r refresh · q close',
      string.format('%-23s %-7s %-19s %6s  %s', 'CHECKPOINT', 'TRIGGER', 'CREATED (UTC)', 'FILES', 'LABEL'),
    }
    for _, c in ipairs(list) do
      lines[#lines + 1] = string.format('%-23s %-7s %-19s %6s  %s', c.checkpoint_id, nn(c.trigger) or '?', ui.time(nn(c.created_at)),
        tostring(nn(c.files) or '-'), nn(c.label) or '')
    end
    if #list == 0 then
      lines[#lines + 1] = '(no checkpoints yet: every :Kiln run and :Kiln verify makes them)'
    end
    vim.api.nvim_buf_clear_namespace(buf, ui.ns, 0, -1)
    ui.set_lines(buf, 0, -1, lines)
    ui.highlight(buf, { { 0, 'KilnHeader' }, { 1, 'KilnDim' } })
    done(cb, nil, list, buf)
  end)
  return buf
end

local function some(paths, n)
  n = n or 5
  if #paths <= n then
    return table.concat(paths, ', ')
  end
  return table.concat(vim.list_slice(paths, 1, n), ', ') .. string.format(' and %d more', #paths - n)
end

--- :Kiln restore ID: a dry run, a confirmation listing it, the restore, the undo id. cb(err, result)
function M.restore(id, cb)
  if not id or not id:match('^cp_') then
    ui.notify('restore needs a checkpoint id (cp_…): :Kiln checkpoints lists them', levels.ERROR)
    return done(cb, 'no checkpoint id')
  end
  core.call('checkpoint_restore', { checkpoint_id = id, dry_run = true }, function(err, dry)
    if err then
      ui.notify('checkpoint_restore: ' .. err, levels.ERROR)
      return done(cb, err)
    end
    local restored, deleted = nn(dry.restored) or {}, nn(dry.deleted) or {}
    if #restored == 0 and #deleted == 0 then
      ui.notify('the files already are as ' .. id .. ' recorded them: nothing to restore')
      return done(cb, nil, dry)
    end
    local parts = {}
    if #restored > 0 then
      parts[#parts + 1] = string.format('%d restored (%s)', #restored, some(restored))
    end
    if #deleted > 0 then
      parts[#parts + 1] = string.format('%d deleted (%s)', #deleted, some(deleted))
    end
    local answer = vim.fn.confirm(string.format('Kiln: restore checkpoint %s? Files: %s. (Kiln records them as they are now first, so this can be undone.)',
      id, table.concat(parts, '; ')), '&Restore\n&Cancel', 2)
    if answer ~= 1 then
      ui.notify('restore of ' .. id .. ' cancelled')
      return done(cb, 'cancelled')
    end
    core.call('checkpoint_restore', { checkpoint_id = id }, function(rerr, r)
      if rerr then
        ui.notify('checkpoint_restore: ' .. rerr, levels.ERROR)
        return done(cb, rerr)
      end
      -- Buffers of restored files: reread them ('autoread'), or have Neovim ask.
      pcall(vim.cmd, 'checktime')
      local undo = nn(r.checkpoint_before)
      local nr, nd = #(nn(r.restored) or {}), #(nn(r.deleted) or {})
      ui.notify(string.format('restored %s: %d file%s restored, %d deleted; undo: :Kiln restore %s', id, nr, nr == 1 and '' or 's', nd,
        tostring(undo)))
      done(cb, nil, r)
    end)
  end)
end

return M
