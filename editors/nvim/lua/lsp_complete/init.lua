-- lsp-complete for Neovim: inline ("ghost text") completions from the lsp-complete server.
--
--   require("lsp_complete").setup({ ... })   -- see :help lsp-complete / M.defaults below
--
-- On Neovim 0.12+ the built-in `vim.lsp.inline_completion` draws the suggestions (unless
-- `use_builtin = false`); on 0.11 this module requests them itself while you type in insert
-- mode and draws them with extmarks. The user commands live in plugin/lsp_complete.lua.

local M = {}

local api = vim.api
local uv = vim.uv or vim.loop

M.name = "lsp_complete"
M.ns = api.nvim_create_namespace("lsp_complete")
-- How to get the server: the same words in every README and message (the package is not on
-- the package index).
M.INSTALL_HINT = 'install it from a checkout of lsp-complete: pipx install ".[default-model]" '
  .. '(or pip install ".[default-model]" in a virtual environment), then run lsp-complete doctor'

---@class lsp_complete.Keys
---@field accept string|false       accept the whole suggestion (falls back to the key itself)
---@field accept_word string|false  accept the next word
---@field accept_line string|false  accept the rest of the current suggestion line
---@field dismiss string|false      hide the suggestion
---@field trigger string|false      ask for a suggestion now
---@field next string|false         show the next alternative suggestion
---@field prev string|false         show the previous alternative suggestion
---@field next_edit_accept string|false  apply the next edit shown (normal mode)

M.defaults = {
  -- The LSP client's name. sidekick.nvim shows next edits of clients whose name contains
  -- "copilot": name = "copilot_lsp_complete" lets it use this plugin's server (README).
  name = "lsp_complete",
  -- The server command. `{ "python", "-m", "lsp_complete", "serve" }` works too.
  cmd = { "lsp-complete", "serve" },
  -- Shortcut for init_options.model: a models.toml name or a path to a .gguf file.
  model = nil,
  -- initializationOptions sent to the server (camelCase keys): model, threads, contextSize,
  -- gpuLayers, maxTokens, multiline ("auto"|"always"|"never"), enabled ({ lang = bool }),
  -- debounceMs.
  init_options = {},
  -- Extra environment for the server process.
  cmd_env = nil,
  -- Warn once if the server has not answered `initialize` this long after it started (a
  -- server stuck at start otherwise leaves no suggestions and no word why); false = never.
  start_timeout_ms = 30000,
  -- Filetypes to attach to; nil = every filetype except `disabled_filetypes`.
  filetypes = nil,
  disabled_filetypes = { "help", "qf", "netrw", "TelescopePrompt", "lazy", "mason", "oil" },
  -- Markers for the root directory (only used to tell the server its workspace).
  root_markers = { ".git", "pyproject.toml", "package.json", "go.mod", "Cargo.toml" },
  -- Wait this long after the last keystroke before asking the server.
  debounce_ms = 50,
  -- Tell the server where the cursor goes (lsp-complete/didMoveCursor) this long after it
  -- stops, so the prompt for that spot is ready when typing starts; false = never.
  cursor_debounce_ms = 150,
  -- Ask automatically while typing; false = only on the `trigger` key.
  auto_trigger = true,
  -- Also offer the suggestion in the completion menu (nvim-cmp, blink.cmp, vim.lsp.completion).
  classic_completion = false,
  -- Use Neovim 0.12's built-in vim.lsp.inline_completion where it exists.
  use_builtin = true,
  -- "inline" pushes the text after the cursor to the right; "overlay" draws over it.
  virt_text_pos = "inline",
  -- Hide the ghost text while the completion menu is open; it comes back when the menu closes.
  hide_during_completion = true,
  -- Next-edit suggestions: the edit the server predicts after yours, shown where it goes
  -- (asked on CursorHold and when the server says one is ready). Off by default: on the
  -- default model they are rarely right yet (README, "Next-edit suggestions"). true also
  -- tells the server to compute them ahead (init_options.nextEdit = "on"); false leaves the
  -- server answering whoever asks (sidekick.nvim over this plugin's server).
  next_edit = false,
  keys = {
    accept = "<Tab>",
    accept_word = "<C-Right>",
    accept_line = "<C-l>",
    dismiss = "<C-]>",
    trigger = "<M-\\>",
    next = "<M-]>",
    prev = "<M-[>",
    -- Normal mode (and insert mode when no ghost text is shown, with `accept`): apply the
    -- next edit shown.
    next_edit_accept = "<Tab>",
  },
}

M.config = vim.deepcopy(M.defaults)

local has_011 = vim.fn.has("nvim-0.11") == 1

-- ---------------------------------------------------------------------------------------------
-- Small helpers
-- ---------------------------------------------------------------------------------------------

--- Client method call that works on 0.10 (`client.request(...)`) and 0.11+ (`client:request`).
local function client_request(client, method, params, handler, bufnr)
  if has_011 then
    return client:request(method, params, handler, bufnr)
  end
  return client.request(method, params, handler, bufnr)
end

local function client_notify(client, method, params)
  if has_011 then
    return client:notify(method, params)
  end
  return client.notify(method, params)
end

local function client_cancel(client, id)
  if has_011 then
    return client:cancel_request(id)
  end
  return client.cancel_request(id)
end

--- Byte index in `line` of the LSP character offset `index` counted in `encoding`.
local function byte_index(line, index, encoding)
  if encoding == "utf-8" then
    return math.min(index, #line)
  end
  local ok, res
  if has_011 then
    ok, res = pcall(vim.str_byteindex, line, encoding, index, false)
  else
    ok, res = pcall(vim.str_byteindex, line, index, encoding == "utf-16")
  end
  if ok and res then
    return res
  end
  return #line
end

local function get_client(client_id)
  return client_id and vim.lsp.get_client_by_id(client_id) or nil
end

--- The running lsp-complete clients (0 or 1 normally).
function M.clients(filter)
  filter = vim.tbl_extend("force", { name = M.name }, filter or {})
  if vim.lsp.get_clients then
    return vim.lsp.get_clients(filter)
  end
  return vim.lsp.get_active_clients(filter) -- Neovim 0.9
end

function M.builtin_available()
  local ic = vim.lsp.inline_completion
  return type(ic) == "table" and type(ic.enable) == "function" and type(ic.get) == "function"
end

local function using_builtin()
  return M.config.use_builtin and M.builtin_available()
end

-- ---------------------------------------------------------------------------------------------
-- Per-buffer state (our own implementation, Neovim < 0.12 or use_builtin = false)
-- ---------------------------------------------------------------------------------------------

---@class lsp_complete.Suggestion
---@field client_id integer
---@field row integer       0-based row of the anchor (where the item's text starts)
---@field col integer       byte column of the anchor
---@field text string       the full text that replaces [anchor, cursor) on accept
---@field after string      the cursor line's text after the cursor when it was requested
---@field replace string    the start of `after` the item replaces (closers its text writes again)
---@field command table?    the server's command to run after accept
---@field item table        the raw LSP item, for tests and debugging

---@class lsp_complete.BufState
---@field client_id integer
---@field timer uv.uv_timer_t?
---@field seq integer                  request sequence number (newest wins)
---@field inflight { client_id: integer, id: integer, seq: integer }?
---@field suggestion lsp_complete.Suggestion?  the one shown (one of `items`)
---@field items lsp_complete.Suggestion[]?      the alternatives of the last answer
---@field invoked boolean?             `items` came from an explicit (Invoked) request
---@field extmark integer?
---@field last_key string?             changedtick:row:col last handled
---@field requests integer             requests sent (for tests)
---@field responses integer            responses received

---@type table<integer, lsp_complete.BufState>
local states = {}
M._states = states

local enabled = true

local function close_timer(timer)
  if timer then
    timer:stop()
    if not timer:is_closing() then
      timer:close()
    end
  end
end

local function stop_timer(st)
  close_timer(st.timer)
  st.timer = nil
end

local function cancel_inflight(st)
  local req = st.inflight
  st.inflight = nil
  st.seq = st.seq + 1 -- its answer, if one still comes, is ignored
  if req then
    local client = get_client(req.client_id)
    if client then
      pcall(client_cancel, client, req.id)
    end
  end
end

local function clear_extmark(bufnr, st)
  if st.extmark then
    pcall(api.nvim_buf_del_extmark, bufnr, M.ns, st.extmark)
    st.extmark = nil
  end
  for _, id in ipairs(st.more_marks or {}) do
    pcall(api.nvim_buf_del_extmark, bufnr, M.ns, id)
  end
  st.more_marks = nil
end

--- Hide the suggestion and stop everything pending for the buffer.
local function reset(bufnr)
  local st = states[bufnr]
  if not st then
    return
  end
  stop_timer(st)
  cancel_inflight(st)
  clear_extmark(bufnr, st)
  st.suggestion = nil
  st.items = nil
  st.invoked = nil
end

--- Text of the buffer between (row, col) and the cursor, or nil when the cursor is before it.
local function text_since(bufnr, row, col, cur_row, cur_col)
  if cur_row < row or (cur_row == row and cur_col < col) then
    return nil
  end
  local ok, lines = pcall(api.nvim_buf_get_text, bufnr, row, col, cur_row, cur_col, {})
  if not ok then
    return nil
  end
  return table.concat(lines, "\n")
end

local function cursor_of(bufnr)
  local win = api.nvim_get_current_win()
  if api.nvim_win_get_buf(win) ~= bufnr then
    return nil
  end
  local pos = api.nvim_win_get_cursor(win)
  return pos[1] - 1, pos[2]
end

--- What is left to show of the suggestion at the current cursor, or nil if it no longer fits
--- (the user typed something else, moved, or typed all of it).
local function remainder(bufnr, s)
  local row, col = cursor_of(bufnr)
  if not row then
    return nil
  end
  local typed = text_since(bufnr, s.row, s.col, row, col)
  if typed == nil or #typed >= #s.text or s.text:sub(1, #typed) ~= typed then
    return nil
  end
  local line = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  if line:sub(col + 1) ~= s.after then
    return nil
  end
  return s.text:sub(#typed + 1), row, col
end

local function display_text(s)
  local ts = vim.bo.tabstop > 0 and vim.bo.tabstop or 8
  return (s:gsub("\t", string.rep(" ", ts)))
end

--- Draw (or redraw) the ghost text for the buffer's suggestion; clears it when it no longer fits.
local function render(bufnr)
  local st = states[bufnr]
  if not st then
    return
  end
  clear_extmark(bufnr, st)
  local s = st.suggestion
  if not s or not enabled then
    return
  end
  local rest, row, col = remainder(bufnr, s)
  if not rest then
    st.suggestion = nil
    st.items = nil
    st.invoked = nil
    return
  end
  if M.config.hide_during_completion and vim.fn.pumvisible() == 1 then
    return -- kept, drawn again when the menu closes (CompleteDone)
  end
  local lines = vim.split(rest, "\n", { plain = true })
  local hl = "LspCompleteGhost"
  local pieces = s.replace ~= "" and M.config.virt_text_pos == "inline" and M._pieces(rest, s.replace)
  if pieces then
    -- The text writes the closers after the cursor again: draw what goes before, between
    -- and after them, each where it goes.
    local ids = {}
    for _, piece in ipairs(pieces) do
      local ok, id = pcall(api.nvim_buf_set_extmark, bufnr, M.ns, row, col + piece[1], {
        virt_text = { { display_text(piece[2]), hl } },
        virt_text_pos = "inline",
        hl_mode = "combine",
        right_gravity = false,
      })
      if ok then
        ids[#ids + 1] = id
      end
    end
    st.extmark = table.remove(ids, 1)
    st.more_marks = ids
    return
  end
  local opts = {
    virt_text = { { display_text(lines[1]), hl } },
    virt_text_pos = M.config.virt_text_pos,
    hl_mode = "combine",
    right_gravity = false,
  }
  if #lines > 1 then
    local virt_lines = {}
    for i = 2, #lines do
      virt_lines[#virt_lines + 1] = { { display_text(lines[i]), hl } }
    end
    opts.virt_lines = virt_lines
  end
  if M.config.virt_text_pos == "overlay" and lines[1] == "" then
    opts.virt_text = nil
  end
  local ok, id = pcall(api.nvim_buf_set_extmark, bufnr, M.ns, row, col, opts)
  if ok then
    st.extmark = id
  end
end

--- The plain item from an LSP inline completion result, converted to a suggestion.
local function to_suggestion(client, item, req)
  local text = item.insertText
  if type(text) == "table" then
    text = text.value
  end
  if type(text) ~= "string" or text == "" then
    return nil
  end
  local row, col = req.row, req.col
  local r = item.range
  if type(r) == "table" and r.start and r.start.line == req.row then
    col = byte_index(req.line, r.start.character, client.offset_encoding or "utf-16")
    -- The item replaces [range.start, cursor): what was typed there must start its text.
    if col > req.col then
      return nil
    end
  end
  local s = {
    client_id = client.id,
    row = row,
    col = col,
    text = text,
    after = req.line:sub(req.col + 1),
    replace = "",
    command = item.command,
    item = item,
  }
  -- Whatever lies between the anchor and the cursor at request time must be the start of the
  -- text, or the suggestion would rewrite typed characters (not what ghost text shows).
  local typed = req.line:sub(col + 1, req.col)
  if text:sub(1, #typed) ~= typed then
    return nil
  end
  -- A range that ends past the cursor (on its line) replaces what lies there: the closers an
  -- auto-closing editor put, which the text writes again in their place.
  local e = type(r) == "table" and r["end"] or nil
  if type(e) == "table" and e.line == req.row then
    local end_col = byte_index(req.line, e.character, client.offset_encoding or "utf-16")
    if end_col > req.col then
      s.replace = req.line:sub(req.col + 1, end_col)
      if not M._pieces(text:sub(#typed + 1), s.replace) then
        return nil
      end
    end
  end
  return s
end

--- The index in `items` to show: the first, or, when cycling by `step`, the one `step` away
--- from the suggestion shown before (`shown`), wrapping around.
local function pick_index(items, shown, step)
  if step then
    for i, s in ipairs(items) do
      if s.text == shown then
        return (i - 1 + step) % #items + 1
      end
    end
  end
  return 1
end

--- Send textDocument/inlineCompletion for the cursor position now.
---@param bufnr integer
---@param kind integer? 1 = invoked (the server may answer with several alternatives), 2 = automatic
---@param step integer? when cycling: show the alternative this far from the one shown now
function M.request(bufnr, kind, step)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local st = states[bufnr]
  if not st or not enabled then
    return
  end
  local client = get_client(st.client_id)
  if not client then
    return
  end
  local row, col = cursor_of(bufnr)
  if not row then
    return
  end
  local shown = st.suggestion and st.suggestion.text
  cancel_inflight(st)
  local encoding = client.offset_encoding or "utf-16"
  local params = vim.lsp.util.make_position_params(0, encoding)
  params.context = { triggerKind = kind or 2 }
  local req = {
    row = row,
    col = col,
    line = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or "",
  }
  st.seq = st.seq + 1
  local seq = st.seq
  local ok, id = client_request(client, "textDocument/inlineCompletion", params, function(err, result)
    local cur = states[bufnr]
    if not cur or cur.seq ~= seq then
      return -- a newer request superseded this one
    end
    cur.inflight = nil
    cur.responses = cur.responses + 1
    cur.last_error = err
    if err or not result then
      return
    end
    if not vim.startswith(api.nvim_get_mode().mode, "i") or api.nvim_get_current_buf() ~= bufnr then
      return
    end
    -- One item, or (for an Invoked request) up to N alternatives; the same text only once.
    local items, seen = {}, {}
    for _, item in ipairs(result.items or result) do
      local s = to_suggestion(client, item, req)
      if s and not seen[s.text] then
        seen[s.text] = true
        items[#items + 1] = s
      end
    end
    cur.items = #items > 0 and items or nil
    cur.invoked = kind == 1
    cur.suggestion = items[pick_index(items, shown, step)]
    render(bufnr)
  end, bufnr)
  if ok and id then
    st.inflight = { client_id = client.id, id = id, seq = seq }
    st.requests = st.requests + 1
  end
end

--- Called on every insert-mode change: keep a suggestion that still fits, ask for a new one.
local function on_change(bufnr)
  local st = states[bufnr]
  if not st or not enabled then
    return
  end
  local row, col = cursor_of(bufnr)
  if not row then
    return
  end
  local key = ("%d:%d:%d"):format(api.nvim_buf_get_changedtick(bufnr), row, col)
  if key == st.last_key then
    return -- TextChangedI and CursorMovedI for the same keystroke
  end
  st.last_key = key
  render(bufnr) -- keeps the rest of a suggestion the user is typing through
  if not M.config.auto_trigger then
    return
  end
  stop_timer(st)
  cancel_inflight(st)
  local timer = uv.new_timer()
  st.timer = timer
  timer:start(
    math.max(0, M.config.debounce_ms or 0),
    0,
    vim.schedule_wrap(function()
      if st.timer ~= timer then
        return
      end
      stop_timer(st)
      if vim.startswith(api.nvim_get_mode().mode, "i") and api.nvim_get_current_buf() == bufnr then
        M.request(bufnr, 2)
      end
    end)
  )
end

M.CURSOR_METHOD = "lsp-complete/didMoveCursor"
-- Server -> client: a block beginning with the suggestion shown at `position` is ready; asking
-- again is answered with it from the server's typing-ahead (no model call).
M.BLOCK_READY_METHOD = "lsp-complete/blockReady"

--- The server announced a block: ask again if the cursor is still on that line of that buffer,
--- at or after the announced spot, in insert mode. Neovim's own inline completion (0.12) asks
--- at its next request.
---@param params {textDocument: {uri: string}, position: {line: integer, character: integer}}
function M._block_ready(params)
  if not params or not params.textDocument or using_builtin() then
    return
  end
  local bufnr = vim.uri_to_bufnr(params.textDocument.uri)
  local st = states[bufnr]
  if not st or api.nvim_get_current_buf() ~= bufnr then
    return
  end
  if not vim.startswith(api.nvim_get_mode().mode, "i") then
    return
  end
  local row, col = cursor_of(bufnr)
  local client = get_client(st.client_id)
  if not row or not client or row ~= params.position.line then
    return
  end
  local line = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  local spot = byte_index(line, params.position.character, client.offset_encoding or "utf-16")
  if col >= spot then
    M.request(bufnr, 2)
  end
end
local cursor_timers = {} ---@type table<integer, uv.uv_timer_t>

local function stop_cursor_timer(bufnr)
  close_timer(cursor_timers[bufnr])
  cursor_timers[bufnr] = nil
end

--- The cursor moved (or entered the buffer): once it rests, tell the server, which prepares
--- the prompt for that spot in idle time, so the first keystroke there is as cheap as the rest.
---@param bufnr integer
---@param client_id integer
function M.cursor_moved(bufnr, client_id)
  local delay = M.config.cursor_debounce_ms
  if delay == false or delay == nil or not enabled then
    return
  end
  stop_cursor_timer(bufnr)
  local timer = uv.new_timer()
  cursor_timers[bufnr] = timer
  timer:start(
    math.max(0, delay),
    0,
    vim.schedule_wrap(function()
      if cursor_timers[bufnr] ~= timer then
        return
      end
      stop_cursor_timer(bufnr)
      local client = get_client(client_id)
      if not client or api.nvim_get_current_buf() ~= bufnr then
        return
      end
      local params = vim.lsp.util.make_position_params(0, client.offset_encoding or "utf-16")
      client_notify(client, M.CURSOR_METHOD, {
        textDocument = params.textDocument,
        position = params.position,
      })
    end)
  )
end

--- Run the item's command (the server counts the acceptance).
local function run_command(s)
  local client = get_client(s.client_id)
  local cmd = s.command
  if not client or type(cmd) ~= "table" or type(cmd.command) ~= "string" then
    return
  end
  client_request(client, "workspace/executeCommand", {
    command = cmd.command,
    arguments = cmd.arguments,
  }, function() end, nil)
end

--- The part of `rest` that one "accept word" takes.
function M._next_word(rest)
  if rest:sub(1, 1) == "\n" then
    return rest:match("^\n[ \t]*")
  end
  return rest:match("^[ \t]*[%w_\128-\255]+")
    or rest:match("^[ \t]*[^%w_\128-\255%s]+")
    or rest:match("^[ \t]+")
    or rest:sub(1, 1)
end

--- The part of `rest` that one "accept line" takes.
function M._next_line(rest)
  if rest:sub(1, 1) == "\n" then
    return rest:match("^\n[^\n]*")
  end
  return rest:match("^[^\n]*")
end

--- `rest` (one line) around `replaced`, whose characters it holds in order: a list of
--- {offset, text}, each piece of `rest` that goes `offset` bytes of `replaced` after the
--- cursor; nil when `rest` does not hold them (or is not one line).
function M._pieces(rest, replaced)
  if rest:find("\n", 1, true) then
    return nil
  end
  local pieces, start = {}, 1
  for i = 1, #replaced do
    local at = rest:find(replaced:sub(i, i), start, true)
    if not at then
      return nil
    end
    if at > start then
      pieces[#pieces + 1] = { i - 1, rest:sub(start, at - 1) }
    end
    start = at + 1
  end
  if start <= #rest then
    pieces[#pieces + 1] = { #replaced, rest:sub(start) }
  end
  return pieces
end

--- Insert `text` at the cursor, replacing the `replace` bytes after it, and put the cursor
--- after it.
local function insert_at_cursor(bufnr, row, col, text, replace)
  local lines = vim.split(text, "\n", { plain = true })
  api.nvim_buf_set_text(bufnr, row, col, row, col + (replace or 0), lines)
  local end_row = row + #lines - 1
  local end_col = (#lines == 1 and col or 0) + #lines[#lines]
  api.nvim_win_set_cursor(0, { end_row + 1, end_col })
end

--- Accept the suggestion: "all" (default), "word" or "line". Returns false when none is shown.
---@param how? "all"|"word"|"line"
function M.accept(how)
  how = how or "all"
  local bufnr = api.nvim_get_current_buf()
  local st = states[bufnr]
  if using_builtin() then
    return M._builtin_accept(how)
  end
  local s = st and st.suggestion
  if not s then
    return false
  end
  local rest, row, col = remainder(bufnr, s)
  if not rest then
    reset(bufnr)
    return false
  end
  local part = rest
  if how == "word" then
    part = M._next_word(rest)
  elseif how == "line" then
    part = M._next_line(rest)
  end
  if part == "" then
    part = rest
  end
  -- A word that reaches the closers the suggestion replaces takes all of it.
  local first = s.replace ~= "" and (M._pieces(rest, s.replace) or {})[1]
  if s.replace ~= "" and not (first and first[1] == 0 and #part <= #first[2]) then
    part = rest
  end
  stop_timer(st)
  cancel_inflight(st)
  clear_extmark(bufnr, st)
  insert_at_cursor(bufnr, row, col, part, #part >= #rest and #s.replace or 0)
  if #part >= #rest then
    st.suggestion = nil
    st.items = nil
    st.invoked = nil
    run_command(s)
  else
    render(bufnr) -- the rest stays on screen
  end
  -- The buffer change is ours: don't let the TextChangedI/CursorMovedI it causes drop or
  -- re-request the rest of a partly accepted suggestion right away.
  local r2, c2 = cursor_of(bufnr)
  st.last_key = ("%d:%d:%d"):format(api.nvim_buf_get_changedtick(bufnr), r2, c2)
  if not st.suggestion and M.config.auto_trigger then
    -- ask for what comes next
    vim.schedule(function()
      if vim.startswith(api.nvim_get_mode().mode, "i") and api.nvim_get_current_buf() == bufnr then
        M.request(bufnr, 2)
      end
    end)
  end
  return true
end

--- Hide the suggestion. Returns false when none is shown.
function M.dismiss()
  local bufnr = api.nvim_get_current_buf()
  if using_builtin() then
    return M._builtin_dismiss(bufnr)
  end
  local st = states[bufnr]
  if not st or not st.suggestion then
    return false
  end
  reset(bufnr)
  return true
end

--- Show the next (`step` 1) or previous (-1) alternative suggestion. The first time at a spot
--- this asks the server explicitly (triggerKind Invoked), which answers with up to N
--- alternatives; then it cycles through the ones that still fit what is typed. Returns false
--- when there is nothing to cycle through.
---@param step integer
function M.cycle(step)
  local bufnr = api.nvim_get_current_buf()
  if using_builtin() then
    local ic = vim.lsp.inline_completion
    return type(ic.select) == "function" and pcall(ic.select, { count = step }) or false
  end
  local st = states[bufnr]
  if not st or not enabled then
    return false
  end
  local fits = {}
  for _, s in ipairs(st.items or {}) do
    if remainder(bufnr, s) then
      fits[#fits + 1] = s
    end
  end
  if st.invoked then
    if #fits < 2 then
      return false
    end
    local shown = st.suggestion and st.suggestion.text
    st.items = fits
    st.suggestion = fits[pick_index(fits, shown, step)]
    render(bufnr)
    return true
  end
  M.request(bufnr, 1, step)
  return true
end

function M.next()
  return M.cycle(1)
end

function M.prev()
  return M.cycle(-1)
end

--- Whether a suggestion is on screen in the current buffer.
function M.visible()
  local bufnr = api.nvim_get_current_buf()
  if using_builtin() then
    local ok, marks = pcall(
      api.nvim_buf_get_extmarks,
      bufnr,
      api.nvim_create_namespace("nvim.lsp.inline_completion"),
      0,
      -1,
      { limit = 1 }
    )
    return ok and #marks > 0
  end
  local st = states[bufnr]
  return st ~= nil and st.suggestion ~= nil and st.extmark ~= nil
end

--- The suggestion as the test suite and `:LspCompleteStatus` see it (nil when none).
function M.current(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local st = states[bufnr]
  if not st then
    return nil
  end
  local out = {
    pending = st.timer ~= nil or st.inflight ~= nil,
    last_error = st.last_error,
    requests = st.requests,
    responses = st.responses,
  }
  local s = st.suggestion
  if s then
    local rest = remainder(bufnr, s)
    out.text = s.text
    out.remainder = rest
    out.row = s.row
    out.col = s.col
    out.item = s.item
    out.index = 1
    for i, other in ipairs(st.items or {}) do
      if other == s then
        out.index = i
      end
    end
    out.count = st.items and #st.items or 1
    out.alternatives = vim.tbl_map(function(other)
      return other.text
    end, st.items or { s })
  end
  return out
end

-- ---------------------------------------------------------------------------------------------
-- Neovim 0.12 built-in inline completion
-- ---------------------------------------------------------------------------------------------

function M._builtin_accept(how)
  local ic = vim.lsp.inline_completion
  if how == "all" then
    return ic.get() and true or false
  end
  return ic.get({
    on_accept = function(item)
      local bufnr = api.nvim_get_current_buf()
      local text = item.insert_text
      if type(text) == "table" then
        text = text.value
      end
      local row, col = cursor_of(bufnr)
      if not row or type(text) ~= "string" then
        return
      end
      local typed = ""
      if item.range and item.range.start then
        typed = text_since(bufnr, item.range.start.row, item.range.start.col, row, col) or ""
      end
      if text:sub(1, #typed) ~= typed then
        return
      end
      local rest = text:sub(#typed + 1)
      local part = how == "word" and M._next_word(rest) or M._next_line(rest)
      if part == "" then
        part = rest
      end
      insert_at_cursor(bufnr, row, col, part)
      if #part >= #rest and item.command then
        run_command({ client_id = item.client_id, command = item.command })
      end
    end,
  }) and true or false
end

function M._builtin_dismiss(bufnr)
  local ic = vim.lsp.inline_completion
  if not M.visible() then
    return false
  end
  -- No public "dismiss": switching the feature off and on for the buffer clears it.
  pcall(ic.enable, false, { bufnr = bufnr })
  pcall(ic.enable, true, { bufnr = bufnr })
  return true
end

-- ---------------------------------------------------------------------------------------------
-- Keys
-- ---------------------------------------------------------------------------------------------

local function termcodes(s)
  return api.nvim_replace_termcodes(s, true, false, true)
end

--- An insert-mode <expr> mapping: run `action` through <Cmd> when a suggestion is shown,
--- otherwise type the key as if it were not mapped.
local function map_key(bufnr, lhs, action, desc)
  if not lhs or lhs == "" then
    return
  end
  local nes_accept = lhs == (M.config.keys or {}).next_edit_accept
  vim.keymap.set("i", lhs, function()
    if M.visible() then
      return ("<Cmd>lua require('lsp_complete').%s<CR>"):format(action)
    end
    if nes_accept and require("lsp_complete.nes").visible() then
      return "<Cmd>lua require('lsp_complete.nes').accept()<CR>"
    end
    return lhs
  end, { buffer = bufnr, expr = true, replace_keycodes = true, silent = true, desc = "lsp-complete: " .. desc })
end

local function set_keys(bufnr)
  local keys = M.config.keys or {}
  map_key(bufnr, keys.accept, "accept('all')", "accept suggestion")
  map_key(bufnr, keys.accept_word, "accept('word')", "accept next word")
  map_key(bufnr, keys.accept_line, "accept('line')", "accept line")
  map_key(bufnr, keys.dismiss, "dismiss()", "dismiss suggestion")
  -- Cycling works with nothing shown too: it asks the server for its alternatives.
  for _, spec in ipairs({ { keys.next, M.next, "next suggestion" }, { keys.prev, M.prev, "previous suggestion" } }) do
    local lhs, fn, desc = spec[1], spec[2], spec[3]
    if lhs and lhs ~= "" then
      vim.keymap.set("i", lhs, function()
        fn()
      end, { buffer = bufnr, silent = true, desc = "lsp-complete: " .. desc })
    end
  end
  if keys.trigger and keys.trigger ~= "" then
    vim.keymap.set("i", keys.trigger, function()
      if using_builtin() then
        pcall(vim.lsp.inline_completion.get)
      else
        M.request(bufnr, 1)
      end
    end, { buffer = bufnr, silent = true, desc = "lsp-complete: suggest now" })
  end
end

-- ---------------------------------------------------------------------------------------------
-- Attaching
-- ---------------------------------------------------------------------------------------------

local augroup = api.nvim_create_augroup("lsp_complete", { clear = true })

function M._on_attach(client, bufnr)
  if not M.config.classic_completion and client.server_capabilities then
    -- The server also offers its suggestion through textDocument/completion for editors
    -- without inline completion. Here the ghost text shows it: keep completion plugins
    -- (nvim-cmp, blink, vim.lsp.completion) from asking the model a second time.
    client.server_capabilities.completionProvider = nil
  end
  local moves = api.nvim_create_augroup("lsp_complete_cursor_" .. bufnr, { clear = true })
  api.nvim_create_autocmd({ "CursorMoved", "BufEnter", "InsertEnter" }, {
    group = moves,
    buffer = bufnr,
    callback = function()
      M.cursor_moved(bufnr, client.id)
    end,
  })
  api.nvim_create_autocmd({ "BufUnload", "BufWipeout" }, {
    group = moves,
    buffer = bufnr,
    callback = function()
      stop_cursor_timer(bufnr)
      pcall(api.nvim_del_augroup_by_id, moves)
    end,
  })
  M.cursor_moved(bufnr, client.id) -- where the cursor is when the file opens
  if M.config.next_edit == true then
    require("lsp_complete.nes").attach(bufnr)
  end
  if using_builtin() then
    pcall(vim.lsp.inline_completion.enable, true, { bufnr = bufnr })
    set_keys(bufnr)
    return
  end
  if states[bufnr] then
    states[bufnr].client_id = client.id
    return
  end
  states[bufnr] = { client_id = client.id, seq = 0, requests = 0, responses = 0 }
  local group = api.nvim_create_augroup("lsp_complete_buf_" .. bufnr, { clear = true })
  api.nvim_create_autocmd({ "TextChangedI", "CursorMovedI", "TextChangedP" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      on_change(bufnr)
    end,
  })
  -- The completion menu opens (hide the ghost text) or closes (show it again); render()
  -- checks pumvisible(), which is still 1 during CompleteDone, hence the schedule.
  api.nvim_create_autocmd({ "CompleteChanged", "CompleteDone" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      vim.schedule(function()
        if api.nvim_buf_is_valid(bufnr) and api.nvim_get_current_buf() == bufnr then
          render(bufnr)
        end
      end)
    end,
  })
  api.nvim_create_autocmd({ "InsertLeave", "BufLeave" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      reset(bufnr)
      local st = states[bufnr]
      if st then
        st.last_key = nil
      end
    end,
  })
  api.nvim_create_autocmd({ "BufUnload", "BufWipeout" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      reset(bufnr)
      states[bufnr] = nil
      pcall(api.nvim_del_augroup_by_id, group)
    end,
  })
  api.nvim_create_autocmd("LspDetach", {
    group = group,
    buffer = bufnr,
    callback = function(args)
      if args.data and args.data.client_id == client.id then
        reset(bufnr)
        states[bufnr] = nil
        pcall(api.nvim_del_augroup_by_id, group)
      end
    end,
  })
  set_keys(bufnr)
end

local function filetype_allowed(ft)
  if ft == nil or ft == "" then
    return false
  end
  local cfg = M.config
  if cfg.filetypes and not vim.tbl_contains(cfg.filetypes, ft) then
    return false
  end
  if cfg.disabled_filetypes and vim.tbl_contains(cfg.disabled_filetypes, ft) then
    return false
  end
  local lang_enabled = cfg.init_options and cfg.init_options.enabled
  if type(lang_enabled) == "table" and lang_enabled[ft] == false then
    return false
  end
  return true
end

--- The client capabilities: Neovim's defaults plus inline completion (so that the server
--- doesn't put its suggestion into the regular completion menu too).
local function capabilities()
  local caps = vim.lsp.protocol.make_client_capabilities()
  caps.textDocument = caps.textDocument or {}
  caps.textDocument.inlineCompletion = caps.textDocument.inlineCompletion or { dynamicRegistration = false }
  return caps
end

local function init_options()
  local opts = vim.deepcopy(M.config.init_options or {})
  if M.config.model and opts.model == nil then
    opts.model = M.config.model
  end
  if M.config.next_edit == true and opts.nextEdit == nil then
    opts.nextEdit = "on"
  end
  -- Our renderer draws a suggestion around the closers after the cursor that it replaces.
  if opts.replaceLineSuffix == nil and not using_builtin() then
    opts.replaceLineSuffix = true
  end
  return opts
end

local started = {} -- client id -> true: servers whose `initialize` answer is watched for
local initialized = {} -- client id -> true: servers that answered `initialize`
local stopped_here = {} -- client id -> true: stopped by :LspCompleteRestart, not failed
-- A server that exited before it answered `initialize` (a bad install, a bad argument): set
-- to its exit code, and no buffer starts another until :LspCompleteRestart (each would fail
-- the same way, with a message per buffer opened).
local failed_start = nil

--- A server started here whose `initialize` is still unanswered (get_clients lists only
--- initialized ones), or nil.
local function starting_client()
  for id in pairs(started) do
    local client = vim.lsp.get_client_by_id(id)
    local stopped = client and client.is_stopped and client:is_stopped()
    if client and not client.initialized and not stopped then
      return client
    end
  end
  return nil
end

local function watch_start(id)
  local timeout = M.config.start_timeout_ms
  if not id or started[id] or not timeout then
    return
  end
  started[id] = true
  vim.defer_fn(function()
    local client = vim.lsp.get_client_by_id(id)
    local stopped = client and client.is_stopped and client:is_stopped()
    if client and not client.initialized and not stopped then
      vim.notify(
        ("lsp-complete: the server (%s) has not answered `initialize` %d s after it started: "
          .. "no suggestions until it does. :checkhealth lsp_complete runs its doctor; "
          .. ":LspCompleteRestart starts it again"):format(
          table.concat(M.config.cmd, " "),
          math.floor(timeout / 1000)
        ),
        vim.log.levels.WARN
      )
    end
  end, timeout)
end

--- The server `id` ended: before `initialize` was answered, and not by us, it failed to
--- start.
local function on_exit(code, signal, id)
  if initialized[id] or stopped_here[id] then
    return
  end
  failed_start = signal ~= 0 and ("signal " .. signal) or ("exit code " .. code)
  vim.schedule(function()
    vim.notify(
      ("lsp-complete: the server (%s) exited at start (%s); it is not started again for other "
        .. "buffers. :checkhealth lsp_complete runs its doctor; :LspCompleteRestart tries again"):format(
        table.concat(M.config.cmd, " "),
        failed_start
      ),
      vim.log.levels.ERROR
    )
  end)
end

--- Start (or reuse) the server for a buffer. One server serves every buffer of this Neovim.
function M.attach(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  if not api.nvim_buf_is_valid(bufnr) or vim.bo[bufnr].buftype ~= "" then
    return nil
  end
  if api.nvim_buf_get_name(bufnr) == "" or not filetype_allowed(vim.bo[bufnr].filetype) then
    return nil
  end
  if failed_start then
    return nil -- told once already; :LspCompleteRestart tries again
  end
  local exe = M.config.cmd and M.config.cmd[1]
  if not exe or vim.fn.executable(exe) ~= 1 then
    vim.notify_once(
      ("lsp-complete: `%s` not found; %s; or set cmd in setup()"):format(tostring(exe), M.INSTALL_HINT),
      vim.log.levels.WARN
    )
    return nil
  end
  local name = api.nvim_buf_get_name(bufnr)
  local root
  if vim.fs.root then
    root = vim.fs.root(bufnr, M.config.root_markers)
  else
    local found = vim.fs.find(M.config.root_markers, { path = vim.fs.dirname(name), upward = true })[1]
    root = found and vim.fs.dirname(found)
  end
  root = root or vim.fn.getcwd()
  local id = vim.lsp.start({
    name = M.name,
    cmd = M.config.cmd,
    cmd_env = M.config.cmd_env,
    root_dir = root,
    init_options = init_options(),
    capabilities = capabilities(),
    handlers = {
      [M.BLOCK_READY_METHOD] = function(_, params)
        M._block_ready(params)
      end,
      [require("lsp_complete.nes").READY_METHOD] = function(_, params)
        require("lsp_complete.nes")._ready(params)
      end,
    },
    on_attach = function(client, b)
      M._on_attach(client, b)
    end,
    on_init = function(client)
      initialized[client.id] = true
    end,
    on_exit = on_exit,
  }, {
    bufnr = bufnr,
    -- One server (one model in memory) for all buffers and roots.
    reuse_client = function(client, config)
      return client.name == config.name and not (client.is_stopped and client:is_stopped())
    end,
  })
  watch_start(id)
  return id
end

-- ---------------------------------------------------------------------------------------------
-- Status, toggling, commands
-- ---------------------------------------------------------------------------------------------

--- Ask the server for `lsp-complete/status` and wait up to `timeout_ms`. Returns result, err.
function M.status_sync(timeout_ms)
  local client = M.clients()[1]
  if not client then
    if starting_client() then
      return nil, "the server has not answered `initialize` yet"
    end
    if failed_start then
      return nil, ("the server exited at start (%s); :LspCompleteRestart tries again"):format(failed_start)
    end
    return nil, "no lsp-complete client is running"
  end
  local res, err
  if has_011 then
    res, err = client:request_sync("lsp-complete/status", {}, timeout_ms or 2000)
  else
    res, err = client.request_sync("lsp-complete/status", {}, timeout_ms or 2000)
  end
  if not res then
    return nil, err or "timeout"
  end
  if res.err then
    return nil, res.err.message or vim.inspect(res.err)
  end
  return res.result, nil
end

function M.is_enabled()
  return enabled
end

function M.enable(on)
  enabled = on ~= false
  if using_builtin() then
    pcall(vim.lsp.inline_completion.enable, enabled)
  end
  if not enabled then
    for bufnr in pairs(states) do
      reset(bufnr)
    end
    for bufnr in pairs(require("lsp_complete.nes")._states) do
      require("lsp_complete.nes").clear(bufnr)
    end
  end
end

--- Ask for the next edit at the cursor now (:LspCompleteNextEdit).
function M.next_edit()
  require("lsp_complete.nes").request(0)
end

--- Apply the next edit shown (:LspCompleteNextEditAccept).
function M.next_edit_accept()
  require("lsp_complete.nes").accept()
end

--- Hide the next edit shown (:LspCompleteNextEditDismiss).
function M.next_edit_dismiss()
  require("lsp_complete.nes").clear(0)
end

function M.toggle()
  M.enable(not enabled)
  vim.notify("lsp-complete: suggestions " .. (enabled and "on" or "off"))
end

local function format_status(status)
  local m = status.model or {}
  local lines = {
    ("model:  %s (%s)"):format(m.name or "?", m.state or "?"),
  }
  if m.path then
    lines[#lines + 1] = "path:   " .. m.path
  end
  if m.device then
    lines[#lines + 1] = "device: " .. m.device
  end
  local recent = status.recent or {}
  local last = recent[#recent]
  if last and last.latencyMs then
    lines[#lines + 1] = ("last:   %d ms"):format(math.floor(last.latencyMs + 0.5))
  end
  for k, v in pairs(status.counters or {}) do
    lines[#lines + 1] = ("%s: %s"):format(k, vim.inspect(v))
  end
  lines[#lines + 1] = "suggestions: " .. (enabled and "on" or "off")
  return table.concat(lines, "\n")
end

function M.show_status()
  local status, err = M.status_sync(3000)
  if not status then
    vim.notify("lsp-complete: " .. tostring(err), vim.log.levels.WARN)
    return
  end
  vim.notify(format_status(status))
end

--- Stop the server and start it again for the loaded buffers (after changing the model).
function M.restart()
  for _, c in ipairs(M.clients()) do
    if has_011 then
      c:stop()
    else
      c.stop()
    end
  end
  failed_start = nil
  local stuck = starting_client() -- it would not answer `shutdown` either
  if stuck then
    stopped_here[stuck.id] = true
    if has_011 then
      stuck:stop(true)
    else
      stuck.stop(true)
    end
  end
  vim.defer_fn(function()
    for _, b in ipairs(api.nvim_list_bufs()) do
      if api.nvim_buf_is_loaded(b) then
        M.attach(b)
      end
    end
  end, 500)
end

--- Configure and start. Call once from your init.lua.
function M.setup(opts)
  M.config = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts or {})
  if opts and opts.keys then
    -- `keys = { accept = false }` turns one key off; keep the other defaults.
    M.config.keys = vim.tbl_extend("force", vim.deepcopy(M.defaults.keys), opts.keys)
  end
  if opts and opts.cmd then
    M.config.cmd = opts.cmd -- a list: don't merge it index by index with the default
  end
  if opts and opts.filetypes then
    M.config.filetypes = opts.filetypes
  end
  if opts and opts.disabled_filetypes then
    M.config.disabled_filetypes = opts.disabled_filetypes
  end
  M.name = M.config.name or M.defaults.name

  api.nvim_set_hl(0, "LspCompleteGhost", { link = "Comment", default = true })
  require("lsp_complete.nes").set_highlights()
  api.nvim_clear_autocmds({ group = augroup })
  api.nvim_create_autocmd("ColorScheme", {
    group = augroup,
    callback = function()
      api.nvim_set_hl(0, "LspCompleteGhost", { link = "Comment", default = true })
      require("lsp_complete.nes").set_highlights()
    end,
  })
  api.nvim_create_autocmd("FileType", {
    group = augroup,
    callback = function(args)
      M.attach(args.buf)
    end,
  })
  if vim.fn.exists(":LspCompleteToggle") ~= 2 then
    -- The plugin folder was put on 'runtimepath' after startup (a plugin manager's config
    -- function): its plugin/ file, which defines the commands, did not run.
    vim.cmd.runtime("plugin/lsp_complete.lua")
  end

  -- Buffers that were open before setup().
  for _, b in ipairs(api.nvim_list_bufs()) do
    if api.nvim_buf_is_loaded(b) and vim.bo[b].filetype ~= "" then
      M.attach(b)
    end
  end
end

return M
