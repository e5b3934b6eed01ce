-- A clean Neovim with only kiln.nvim from this checkout, set up the way the README tells users to,
-- pointed at the Kiln binary under test (KILN_BIN) and a private state directory (KILN_HOME).
local here = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h')
local plugin = vim.fn.fnamemodify(here .. '/../../../editor-plugins/nvim', ':p'):gsub('/$', '')
vim.opt.rtp:prepend(plugin)
vim.opt.swapfile = false
vim.opt.shadafile = 'NONE'
vim.opt.more = false
vim.cmd('runtime plugin/kiln.lua')
require('kiln').setup({
  cmd = assert(os.getenv('KILN_BIN'), 'KILN_BIN is not set'),
  -- kiln serve on a free port, so a test run never takes 7700 from anyone.
  env = { KILN_SERVE_LISTEN = '127.0.0.1:0' },
  log_level = 'debug',
})
