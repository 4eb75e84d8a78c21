-- :checkhealth lsp_complete: Neovim, the server command, `lsp-complete doctor` (Python,
-- llama.cpp, the model, the cache folder) and the running server's model state.
local M = {}

local health = vim.health

--- Run `argv`; returns stdout, stderr and the exit code (nil code: it could not start).
local function run(argv, env)
  local okc, obj = pcall(vim.system, argv, { text = true, env = env })
  if not okc then
    return nil, tostring(obj), nil
  end
  local res = obj:wait(60000)
  return res.stdout or "", res.stderr or "", res.code
end

--- The doctor's command line for the server command `cmd`: what comes before "serve", then
--- `doctor --json`, and the model the editor asks for (init_options, or `--model` of cmd).
function M.doctor_argv(cmd, model)
  local argv, serve_at = {}, nil
  for i, arg in ipairs(cmd) do
    if arg == "serve" then
      serve_at = i
      break
    end
    argv[#argv + 1] = arg
  end
  if not serve_at then
    return nil
  end
  for i = serve_at + 1, #cmd do
    if cmd[i] == "--model" and cmd[i + 1] and not model then
      model = cmd[i + 1]
    end
  end
  vim.list_extend(argv, { "doctor", "--json" })
  if model then
    vim.list_extend(argv, { "--model", model })
  end
  return argv
end

local function report_doctor(plugin, cmd)
  local cfg = plugin.config
  local model = (cfg.init_options or {}).model or cfg.model
  local argv = M.doctor_argv(cmd, model)
  if not argv then
    health.info("the server command has no `serve`: skipping `lsp-complete doctor`")
    return
  end
  local out, err, code = run(argv, cfg.cmd_env)
  local okj, doc = pcall(vim.json.decode, out or "")
  if not okj or type(doc) ~= "table" or type(doc.checks) ~= "table" then
    health.error(("`%s` failed (exit %s): %s"):format(table.concat(argv, " "), tostring(code), vim.trim(err or "")), {
      "an older server without `doctor`? " .. plugin.INSTALL_HINT,
    })
    return
  end
  health.ok("server version: " .. tostring(doc.version))
  for _, check in ipairs(doc.checks) do
    local text = ("%s: %s"):format(check.name, check.summary)
    local advice = check.fix ~= vim.NIL and check.fix or nil
    if check.status == "ok" then
      health.ok(text)
    elseif check.status == "warn" then
      health.warn(text, advice)
    elseif check.status == "fail" then
      health.error(text, advice)
    else
      health.info(text)
    end
  end
end

local function report_model(plugin)
  local clients = plugin.clients()
  if #clients == 0 then
    health.info("no lsp-complete client is running: open a source file to start one, then run :checkhealth lsp_complete again")
    return
  end
  local status, serr = plugin.status_sync(5000)
  if not status then
    health.error("lsp-complete/status failed: " .. tostring(serr))
    return
  end
  local m = status.model or {}
  local desc = ("%s (%s)%s"):format(m.name or "?", m.path or "?", m.device and m.device ~= vim.NIL and (" on " .. m.device) or "")
  if m.state == "ready" then
    health.ok("model ready: " .. desc)
  elseif m.state == "loading" then
    health.warn("model still loading: " .. desc)
  else
    health.error(("model state %s: %s"):format(tostring(m.state), desc), {
      "the server's messages: :lua vim.cmd.tabedit(vim.lsp.log.get_filename())",
      "lsp-complete models list",
    })
  end
  local recent = status.recent or {}
  if #recent > 0 and recent[#recent].latencyMs then
    health.info(("last suggestion took %d ms"):format(math.floor(recent[#recent].latencyMs + 0.5)))
  end
  health.info("suggestions are " .. (plugin.is_enabled() and "on" or "off (:LspCompleteToggle)"))
end

function M.check()
  health.start("lsp-complete")
  if vim.fn.has("nvim-0.11") == 1 then
    health.ok("Neovim " .. tostring(vim.version()))
  else
    health.error("Neovim 0.11 or newer is needed")
  end
  local loaded, plugin = pcall(require, "lsp_complete")
  if not loaded then
    health.error("require('lsp_complete') failed: " .. tostring(plugin))
    return
  end
  local cfg = plugin.config
  if plugin.builtin_available() and cfg.use_builtin then
    health.ok("using Neovim's built-in vim.lsp.inline_completion")
  else
    health.ok("using the plugin's own ghost text")
  end

  health.start("lsp-complete: server")
  local cmd = cfg.cmd or {}
  local exe = cmd[1]
  if not exe or exe == "" then
    health.error("setup({ cmd = ... }) has no command")
    return
  end
  if vim.fn.executable(exe) ~= 1 then
    health.error(("`%s` is not executable or not on $PATH"):format(exe), {
      plugin.INSTALL_HINT,
      "or setup({ cmd = { '/path/to/venv/bin/lsp-complete', 'serve' } })",
    })
    return
  end
  health.ok(("server command: %s (%s)"):format(table.concat(cmd, " "), vim.fn.exepath(exe)))
  report_doctor(plugin, cmd)

  health.start("lsp-complete: running server")
  report_model(plugin)
end

return M
