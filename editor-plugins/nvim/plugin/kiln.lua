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
  desc = 'Kiln: open | run | verify | traces | changes | checkpoints | restore | services | publish | log | restart | stop | status',
})

-- :KilnServices is :Kiln services, for a mapping or a command line that names it directly.
vim.api.nvim_create_user_command('KilnServices', function()
  require('kiln').services()
end, { nargs = 0, desc = 'Kiln: the services of the live sandboxes (R restarts, <CR> opens the log)' })
