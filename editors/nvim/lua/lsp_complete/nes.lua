-- lsp-complete for Neovim: next-edit suggestions (the edit the server predicts after yours).
--
-- The server speaks Copilot's protocol: `textDocument/copilotInlineEdit` answers
-- `{edits = {{text, range, textDocument = {uri, version}, command}}}` (alternatives; we show the
-- first), `textDocument/didShowInlineEdit` tells it one was shown, and its own notification
-- `lsp-complete/nextEditReady` says an edit is ready for a document version. The edit is shown
-- with extmarks: the replaced text highlighted, the lines as they would become as virtual lines
-- under it. Accepting replaces the range by the text exactly as sent (no re-indenting), runs the
-- edit's command (the server counts it), and is refused when the buffer changed since.

local M = {}

local api = vim.api

M.REQUEST_METHOD = "textDocument/copilotInlineEdit"
M.SHOWN_METHOD = "textDocument/didShowInlineEdit"
M.READY_METHOD = "lsp-complete/nextEditReady"
M.ns = api.nvim_create_namespace("lsp_complete_next_edit")

---@class lsp_complete.NextEdit
---@field client_id integer
---@field bufnr integer
---@field version integer     the buffer version the edit is for
---@field edit table          the LSP edit as the server sent it
---@field srow integer        replaced range, 0-based rows and byte columns
---@field scol integer
---@field erow integer
---@field ecol integer

---@class lsp_complete.NextEditState
---@field seq integer
---@field inflight { client_id: integer, id: integer }?
---@field shown lsp_complete.NextEdit?
---@field requests integer
---@field responses integer
---@field last_result table?   the last answer as received (for tests and :LspCompleteStatus)
---@field asked_tick integer?  b:changedtick when it last asked (CursorHold asks once per text)

---@type table<integer, lsp_complete.NextEditState>
local states = {}
M._states = states

local function config()
  return require("lsp_complete").config
end

local function is_on()
  local cfg = config()
  return cfg.next_edit == true and require("lsp_complete").is_enabled()
end

local function buf_version(bufnr)
  return vim.lsp.util.buf_versions[bufnr]
end

local function byte_col(bufnr, row, character, encoding)
  local line = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  if encoding == "utf-8" then
    return math.min(character, #line)
  end
  local ok, col = pcall(vim.str_byteindex, line, encoding, character, false)
  return ok and col or #line
end

local function state(bufnr)
  local st = states[bufnr]
  if not st then
    st = { seq = 0, requests = 0, responses = 0 }
    states[bufnr] = st
  end
  return st
end

local function cancel(st)
  local req = st.inflight
  st.inflight = nil
  st.seq = st.seq + 1 -- a late answer to it is ignored
  if req then
    local client = vim.lsp.get_client_by_id(req.client_id)
    if client then
      pcall(client.cancel_request, client, req.id)
    end
  end
end

--- Hide the edit shown in `bufnr` (and forget it); a request under way is cancelled too.
function M.clear(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local st = states[bufnr]
  if not st then
    return
  end
  cancel(st)
  st.shown = nil
  if api.nvim_buf_is_valid(bufnr) then
    api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  end
end

--- The lines the replaced rows become: the text before the range on its first row, the new
--- text, the rest of its last row.
local function new_lines(bufnr, e)
  local first = api.nvim_buf_get_lines(bufnr, e.srow, e.srow + 1, false)[1] or ""
  local last = api.nvim_buf_get_lines(bufnr, e.erow, e.erow + 1, false)[1] or ""
  local text = first:sub(1, e.scol) .. e.edit.text .. last:sub(e.ecol + 1)
  return vim.split(text, "\n", { plain = true })
end

local function display(s)
  local ts = vim.bo.tabstop > 0 and vim.bo.tabstop or 8
  return (s:gsub("\t", string.rep(" ", ts)))
end

local function render(e)
  api.nvim_buf_clear_namespace(e.bufnr, M.ns, 0, -1)
  if e.srow ~= e.erow or e.scol ~= e.ecol then
    api.nvim_buf_set_extmark(e.bufnr, M.ns, e.srow, e.scol, {
      end_row = e.erow,
      end_col = e.ecol,
      hl_group = "LspCompleteNextEditDelete",
      priority = 200,
    })
  end
  local virt = {}
  for _, line in ipairs(new_lines(e.bufnr, e)) do
    virt[#virt + 1] = { { display(line), "LspCompleteNextEditAdd" } }
  end
  api.nvim_buf_set_extmark(e.bufnr, M.ns, e.erow, 0, { virt_lines = virt, priority = 200 })
end

--- Turn the server's answer into the edit to show, or nil (nothing to change, another buffer
--- version, a range outside the buffer).
local function to_next_edit(client, bufnr, version, result)
  local edit = type(result) == "table" and type(result.edits) == "table" and result.edits[1]
  if type(edit) ~= "table" or type(edit.text) ~= "string" or type(edit.range) ~= "table" then
    return nil
  end
  local doc = edit.textDocument or {}
  if doc.version ~= nil and doc.version ~= version then
    return nil
  end
  local r = edit.range
  local count = api.nvim_buf_line_count(bufnr)
  if r.start.line >= count or r["end"].line >= count or r.start.line > r["end"].line then
    return nil
  end
  local enc = client.offset_encoding or "utf-16"
  return {
    client_id = client.id,
    bufnr = bufnr,
    version = version,
    edit = edit,
    srow = r.start.line,
    scol = byte_col(bufnr, r.start.line, r.start.character, enc),
    erow = r["end"].line,
    ecol = byte_col(bufnr, r["end"].line, r["end"].character, enc),
  }
end

--- Show an answer of the server (exposed for tests: the same path as a real answer).
function M._on_result(client, bufnr, version, result)
  local st = state(bufnr)
  st.responses = st.responses + 1
  st.last_result = result
  api.nvim_buf_clear_namespace(bufnr, M.ns, 0, -1)
  st.shown = nil
  if not is_on() or buf_version(bufnr) ~= version or api.nvim_get_current_buf() ~= bufnr then
    return -- typed since, or moved on: the answer is for a text that is gone
  end
  local e = to_next_edit(client, bufnr, version, result)
  if not e then
    return
  end
  st.shown = e
  render(e)
  client:notify(M.SHOWN_METHOD, { item = e.edit })
end

--- Ask the server for the next edit at the cursor of the current buffer.
function M.request(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  if not is_on() or api.nvim_get_current_buf() ~= bufnr then
    return
  end
  local client = require("lsp_complete").clients({ bufnr = bufnr })[1]
  if not client then
    return
  end
  local st = state(bufnr)
  M.clear(bufnr)
  st.asked_tick = api.nvim_buf_get_changedtick(bufnr)
  local version = buf_version(bufnr)
  local params = vim.lsp.util.make_position_params(0, client.offset_encoding or "utf-16")
  params.textDocument.version = version
  params.context = { triggerKind = 2 }
  local seq = st.seq
  local ok, id = client:request(M.REQUEST_METHOD, params, function(err, result)
    local cur = states[bufnr]
    if not cur or cur.seq ~= seq or not api.nvim_buf_is_valid(bufnr) then
      return -- superseded, cleared or gone
    end
    cur.inflight = nil
    if err then
      cur.responses = cur.responses + 1
      cur.last_error = err
      return
    end
    M._on_result(client, bufnr, version, result)
  end, bufnr)
  if ok and id then
    st.inflight = { client_id = client.id, id = id }
    st.requests = st.requests + 1
  end
end

--- Apply the edit shown in the current buffer; returns true when it did.
function M.accept()
  local bufnr = api.nvim_get_current_buf()
  local st = states[bufnr]
  local e = st and st.shown
  if not e then
    return false
  end
  M.clear(bufnr)
  local client = vim.lsp.get_client_by_id(e.client_id)
  if not client or buf_version(bufnr) ~= e.version then
    return false -- the buffer changed since: the range no longer means what it meant
  end
  local enc = client.offset_encoding or "utf-16"
  vim.lsp.util.apply_text_edits({ { range = e.edit.range, newText = e.edit.text } }, bufnr, enc)
  -- The cursor goes to the end of the new text.
  local lines = vim.split(e.edit.text, "\n", { plain = true })
  local row = e.srow + #lines - 1
  local col = (#lines == 1 and e.scol or 0) + #lines[#lines]
  local win = api.nvim_get_current_win()
  local last = api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ""
  pcall(api.nvim_win_set_cursor, win, { row + 1, math.max(0, math.min(col, #last - 1)) })
  local cmd = e.edit.command
  if type(cmd) == "table" and type(cmd.command) == "string" then
    client:request("workspace/executeCommand", { command = cmd.command, arguments = cmd.arguments },
      function() end, bufnr)
  end
  return true
end

--- Whether an edit is shown in the current buffer.
function M.visible()
  local st = states[api.nvim_get_current_buf()]
  return st ~= nil and st.shown ~= nil
end

--- The server says an edit is ready for a document version: ask, when it is the current
--- buffer at that version (the answer is then the ready one).
function M._ready(params)
  local doc = type(params) == "table" and params.textDocument
  if type(doc) ~= "table" or type(doc.uri) ~= "string" then
    return
  end
  local bufnr = vim.uri_to_bufnr(doc.uri)
  if bufnr ~= api.nvim_get_current_buf() or (doc.version ~= nil and doc.version ~= buf_version(bufnr)) then
    return
  end
  M.request(bufnr)
end

--- What tests and :LspCompleteStatus see for a buffer.
function M.current(bufnr)
  bufnr = (bufnr == nil or bufnr == 0) and api.nvim_get_current_buf() or bufnr
  local st = states[bufnr]
  if not st then
    return nil
  end
  local e = st.shown
  return {
    requests = st.requests,
    responses = st.responses,
    pending = st.inflight ~= nil,
    last_result = st.last_result,
    last_error = st.last_error,
    edit = e and e.edit or nil,
    version = e and e.version or nil,
  }
end

local on_key_set = false

--- Wire a buffer: ask on CursorHold, drop the edit when the text changes or the buffer is left.
function M.attach(bufnr)
  state(bufnr)
  local group = api.nvim_create_augroup("lsp_complete_nes_" .. bufnr, { clear = true })
  api.nvim_create_autocmd({ "CursorHold", "CursorHoldI" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      -- Only for text not asked about yet: resting the cursor in an unchanged buffer would
      -- make the server run the model for nothing.
      local st = states[bufnr]
      local tick = api.nvim_buf_get_changedtick(bufnr)
      if st and not M.visible() and st.inflight == nil and st.asked_tick ~= tick then
        M.request(bufnr)
      end
    end,
  })
  api.nvim_create_autocmd({ "TextChanged", "TextChangedI", "BufLeave" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.clear(bufnr)
    end,
  })
  api.nvim_create_autocmd({ "BufUnload", "BufWipeout" }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.clear(bufnr)
      states[bufnr] = nil
      pcall(api.nvim_del_augroup_by_id, group)
    end,
  })
  if not on_key_set then
    on_key_set = true
    local esc = vim.keycode and vim.keycode("<Esc>") or api.nvim_replace_termcodes("<Esc>", true, false, true)
    vim.on_key(function(_, typed)
      if typed == esc and M.visible() then
        vim.schedule(function()
          M.clear(0)
        end)
      end
    end, M.ns)
  end
  local key = (config().keys or {}).next_edit_accept
  if key and key ~= "" then
    -- Normal mode: the key accepts when an edit is shown, else does what it did.
    vim.keymap.set("n", key, function()
      if M.visible() then
        return "<Cmd>lua require('lsp_complete.nes').accept()<CR>"
      end
      return key
    end, { buffer = bufnr, expr = true, replace_keycodes = true, silent = true,
           desc = "lsp-complete: accept the next edit" })
  end
end

function M.set_highlights()
  api.nvim_set_hl(0, "LspCompleteNextEditDelete", { link = "DiffDelete", default = true })
  api.nvim_set_hl(0, "LspCompleteNextEditAdd", { link = "DiffAdd", default = true })
end

return M
