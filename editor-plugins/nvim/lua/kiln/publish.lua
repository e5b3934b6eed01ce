-- :Kiln publish: the publish tool; the URL goes to the messages and registers.
local config = require('kiln.config')
local core = require('kiln.core')
local mcp = require('kiln.mcp')
local ui = require('kiln.ui')

local nn = mcp.nn
local levels = vim.log.levels
local state = core.state
local done = core.done

local M = {}

local function copy_url(url)
  local regs = { '"' }
  vim.fn.setreg('"', url)
  local r = config.options.register
  if r ~= '' and r ~= '"' then
    local clip = r == '+' or r == '*'
    if not clip or vim.fn.has('clipboard') == 1 then
      if pcall(vim.fn.setreg, r, url) then
        regs[#regs + 1] = r
      end
    end
  end
  return regs
end

--- Publishes a folder or file of the workspace; the URL goes to the message area and registers.
--- opts: {name=} the artifact's name (default: the server's, from kiln.json or the path), and
--- {password=, invite={names}} for share password/invite (asked for when missing).
function M.publish(path, share, cb, opts)
  opts = opts or {}
  if not path or path == '' then
    -- Offer kiln.json's publish.path (as the server parsed it) as the answer.
    local s = state.session
    local cfg = s and s.workspace and nn(s.workspace.config)
    local pub = type(cfg) == 'table' and nn(cfg.publish)
    local default = type(pub) == 'table' and nn(pub.path) or nil
    vim.ui.input({ prompt = 'Kiln publish (folder or file): ', completion = 'file', default = default }, function(input)
      if input and input ~= '' then
        M.publish(input, share, cb, opts)
      end
    end)
    return
  end
  if share and not vim.tbl_contains(core.share_modes, share) then
    ui.notify('share must be one of ' .. table.concat(core.share_modes, ', '), levels.ERROR)
    return done(cb, 'bad share mode')
  end
  local args = { path = core.abspath(path), share = share }
  if share == 'password' and not opts.password then
    local pw = vim.fn.inputsecret('Password for ' .. vim.fn.fnamemodify(args.path, ':t') .. ': ')
    if pw == '' then
      ui.notify('publish cancelled (no password)')
      return done(cb, 'cancelled')
    end
    opts.password = pw
  end
  if share == 'invite' and not opts.invite then
    vim.ui.input({ prompt = 'Invite (names, comma-separated): ' }, function(input)
      local names = {}
      for n in (input or ''):gmatch('[^,]+') do
        n = vim.trim(n)
        if n ~= '' then
          names[#names + 1] = n
        end
      end
      if #names == 0 then
        ui.notify('publish cancelled (nobody invited)')
        return done(cb, 'cancelled')
      end
      opts.invite = names
      M.publish(path, share, cb, opts)
    end)
    return
  end
  args.password, args.invite, args.name = opts.password, opts.invite, opts.name
  ui.echo('Kiln: publishing ' .. args.path .. '…', 'MoreMsg')
  core.call('publish', args, function(err, res)
    if err and not args.password and err:find('needs a password', 1, true) then
      -- kiln.json made it a password share (publish.share): ask, then publish again. The redraw
      -- clears the message line, so the prompt does not scroll it into a hit-enter prompt.
      vim.cmd('redraw')
      local pw = vim.fn.inputsecret('Password for ' .. vim.fn.fnamemodify(args.path, ':t') .. ': ')
      if pw ~= '' then
        opts.password = pw
        return M.publish(path, share or 'password', cb, opts)
      end
    end
    if err then
      ui.notify('publish: ' .. err, levels.ERROR)
      return done(cb, err)
    end
    local url = nn(res.url) or ''
    copy_url(url)
    local lines = {
      string.format('published %s v%s%s: %s (copied)', res.artifact, res.version,
        res.share ~= 'public' and (' (' .. res.share .. ')') or '', url),
    }
    for _, inv in ipairs(nn(res.invites) or {}) do
      lines[#lines + 1] = string.format('  invite %s: %s', inv.name, inv.url)
    end
    ui.notify(table.concat(lines, '\n'))
    if nn(res.serve_error) then
      ui.notify('published, but no server could be started: ' .. res.serve_error, levels.WARN)
    end
    done(cb, nil, res)
  end)
end

return M
