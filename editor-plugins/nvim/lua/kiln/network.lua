-- A run's network log (trace_get's network_log and result.network, for runs with a network
-- allowlist) in a few lines: totals, the refused destinations with their reason and what to add
-- to network.allow, then the allowed ones with their bytes. Repeats of one destination are one
-- line; at most M.max_lines lines, then "N more".
local mcp = require('kiln.mcp')

local nn = mcp.nn

local M = {}

M.max_lines = 20

function M.bytes(n)
  n = nn(n)
  if type(n) ~= 'number' then
    return '?'
  elseif n < 1024 then
    return string.format('%d B', n)
  elseif n < 1048576 then
    return string.format('%.1f KiB', n / 1024)
  elseif n < 1073741824 then
    return string.format('%.1f MiB', n / 1048576)
  end
  return string.format('%.2f GiB', n / 1073741824)
end

local function bracketed(host)
  return host:find(':', 1, true) and ('[' .. host .. ']') or host
end

-- The entry Kiln's 403 suggests ("To allow it, add ..."): the name, with the port unless 80 or 443.
local function allow_entry(e)
  local reason, host, port = nn(e.reason) or '', nn(e.host), nn(e.port)
  if type(host) ~= 'string' or host == '' then
    return nil
  end
  if reason ~= 'no allow entry matches' and not reason:find('^an IP address is refused unless') then
    return nil
  end
  if port == nil or port == 80 or port == 443 then
    return bracketed(host)
  end
  return bracketed(host) .. ':' .. tostring(port)
end

--- The view of a trace (trace_get's `trace`): nil without a network log (no allowlist), else
--- {summary=, allowed=, refused=, lines={{denied=, target=, detail=, count=, allow=}}, more=}.
function M.view(trace)
  local log = type(trace) == 'table' and nn(trace.network_log)
  if type(log) ~= 'table' then
    return nil
  end
  local groups, order = {}, {}
  local allowed, refused, up, down = 0, 0, 0, 0
  for _, e in ipairs(log) do
    if type(e) == 'table' then
      local denied = nn(e.decision) ~= 'allowed'
      if denied then
        refused = refused + 1
      else
        allowed = allowed + 1
      end
      local bu, bd = tonumber(nn(e.bytes_up)) or 0, tonumber(nn(e.bytes_down)) or 0
      up, down = up + bu, down + bd
      local host = nn(e.host)
      local target
      if type(host) == 'string' and host ~= '' then
        target = bracketed(host) .. ':' .. tostring(nn(e.port) or '?')
      else
        target = nn(e.kind) == 'bad_request' and 'bad request' or '?'
      end
      local reason = nn(e.reason)
      reason = (type(reason) == 'string' and reason ~= '') and reason or 'refused'
      local key = (denied and 'D ' or 'A ') .. target .. ' ' .. (denied and reason or '')
      local g = groups[key]
      if not g then
        g = { denied = denied, target = target, count = 0, up = 0, down = 0, errors = {}, open = false,
          detail = denied and reason or nil,
          allow = denied and allow_entry(e) or nil }
        groups[key] = g
        order[#order + 1] = g
      end
      g.count = g.count + 1
      g.up, g.down = g.up + bu, g.down + bd
      local err = nn(e.error)
      if type(err) == 'string' and err ~= '' and not vim.tbl_contains(g.errors, err) then
        g.errors[#g.errors + 1] = err
      end
      if nn(e.open) == true then
        g.open = true
      end
    end
  end
  local ordered = {}
  for _, want_denied in ipairs({ true, false }) do
    for _, g in ipairs(order) do
      if g.denied == want_denied then
        if not g.denied then
          g.detail = string.format('%s up, %s down', M.bytes(g.up), M.bytes(g.down))
          if #g.errors > 0 then
            g.detail = g.detail .. ', error: ' .. table.concat(g.errors, '; ')
          end
          if g.open then
            g.detail = g.detail .. ', still open'
          end
        end
        ordered[#ordered + 1] = g
      end
    end
  end
  local lines = {}
  for i = 1, math.min(#ordered, M.max_lines) do
    lines[i] = ordered[i]
  end
  -- result.network counts every connection (the log keeps at most 1000): its totals when present.
  local totals = type(nn(trace.result)) == 'table' and nn(trace.result.network)
  local not_listed = 0
  if type(totals) == 'table' then
    allowed = tonumber(nn(totals.allowed)) or allowed
    refused = tonumber(nn(totals.denied)) or refused
    up = tonumber(nn(totals.bytes_up)) or up
    down = tonumber(nn(totals.bytes_down)) or down
    not_listed = tonumber(nn(totals.not_listed)) or 0
  end
  local summary = string.format('%d allowed, %d refused; %s up, %s down', allowed, refused, M.bytes(up), M.bytes(down))
  if not_listed > 0 then
    summary = summary .. string.format(' (%d not in the log)', not_listed)
  end
  return { summary = summary, allowed = allowed, refused = refused, lines = lines, more = #ordered - #lines }
end

--- One destination as text: `refused  unlisted.test:80  no allow entry matches (add "unlisted.test" to network.allow)`.
function M.line_text(l)
  local s = string.format('%-7s  %s  %s', l.denied and 'refused' or 'allowed', l.target, l.detail)
  if l.allow then
    s = s .. string.format(' (add "%s" to network.allow)', l.allow)
  end
  if l.count > 1 then
    s = s .. string.format(' (×%d)', l.count)
  end
  return s
end

--- The view as lines with highlight groups: {{text, group}}; `indent` before each destination.
function M.lines(v, indent, trace_id)
  local out = {}
  for _, l in ipairs(v.lines) do
    out[#out + 1] = { indent .. M.line_text(l), l.denied and 'KilnFail' or nil }
  end
  if v.more > 0 then
    out[#out + 1] = { string.format('%s… %d more%s', indent, v.more,
      trace_id and (' (the whole log: trace_get ' .. trace_id .. ')') or ''), 'KilnDim' }
  end
  return out
end

--- A policy's network as text: "none", "host", or an allowlist "allow up.test:8080, *.example.com;
--- deny bad.example.com; private allowed".
function M.policy_text(n)
  if type(n) ~= 'table' then
    return tostring(n)
  end
  local function names(list)
    local out = {}
    for _, x in ipairs(type(nn(list)) == 'table' and list or {}) do
      out[#out + 1] = tostring(nn(x))
    end
    return out
  end
  local allow, deny = names(n.allow), names(n.deny)
  local parts = { 'allow ' .. (#allow > 0 and table.concat(allow, ', ') or 'nothing') }
  if #deny > 0 then
    parts[#parts + 1] = 'deny ' .. table.concat(deny, ', ')
  end
  if nn(n.allow_private) == true then
    parts[#parts + 1] = 'private allowed'
  end
  return table.concat(parts, '; ')
end

return M
