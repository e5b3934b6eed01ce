-- Defines :Kiln; everything else loads on first use (require('kiln')).
if vim.g.loaded_kiln then
  return
end
vim.g.loaded_kiln = 1

if vim.fn.has('nvim-0.7') == 0 then
  vim.api.nvim_err_writeln('kiln.nvim needs Neovim 0.7 or newer')
  return
end

vim.api.nvim_create_user_command('Kiln', function(opts)
  require('kiln').command(opts)
end, {
  nargs = '*',
  complete = function(arglead, cmdline, cursorpos)
    return require('kiln').complete(arglead, cmdline, cursorpos)
  end,
  desc = 'Kiln: open | run | verify | traces | publish | log | restart | stop | status',
})
