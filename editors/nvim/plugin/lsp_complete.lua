-- lsp-complete: the user commands, defined at startup without loading the plugin itself
-- (lua/lsp_complete is required the first time a command runs). Suggestions start with
-- require("lsp_complete").setup({ ... }); see :help lsp-complete.
if vim.g.loaded_lsp_complete then
  return
end
vim.g.loaded_lsp_complete = true

if vim.fn.has("nvim-0.11") == 0 then
  vim.api.nvim_echo({ { "lsp-complete needs Neovim 0.11 or newer", "WarningMsg" } }, true, {})
  return
end

local commands = {
  LspCompleteToggle = { "toggle", "lsp-complete: suggestions on/off" },
  LspCompleteStatus = { "show_status", "lsp-complete: model, state, last latency, counters" },
  LspCompleteRestart = { "restart", "lsp-complete: restart the server" },
  LspCompleteNextEdit = { "next_edit", "lsp-complete: ask for the next edit at the cursor" },
  LspCompleteNextEditAccept = { "next_edit_accept", "lsp-complete: apply the next edit shown" },
  LspCompleteNextEditDismiss = { "next_edit_dismiss", "lsp-complete: hide the next edit shown" },
}
for name, spec in pairs(commands) do
  vim.api.nvim_create_user_command(name, function()
    require("lsp_complete")[spec[1]]()
  end, { desc = spec[2] })
end
