-- :checkhealth lsp_complete
local M = {}

local health = vim.health or require("health")
local start = health.start or health.report_start
local ok = health.ok or health.report_ok
local warn = health.warn or health.report_warn
local err = health.error or health.report_error
local info = health.info or health.report_info

--- Run `argv` and return its trimmed stdout, or nil and a message.
local function run(argv, env)
  if vim.system then
    local okc, obj = pcall(vim.system, argv, { text = true, env = env })
    if not okc then
      return nil, tostring(obj)
    end
    local res = obj:wait(15000)
    if res.code ~= 0 then
      return nil, vim.trim((res.stderr or "") .. (res.stdout or ""))
    end
    return vim.trim(res.stdout or ""), nil
  end
  local out = vim.fn.system(argv)
  if vim.v.shell_error ~= 0 then
    return nil, vim.trim(out)
  end
  return vim.trim(out), nil
end

--- The server's version: `lsp-complete --version`, or, for `python -m lsp_complete ...`,
--- the package's __version__.
local function server_version(cmd, env)
  local exe = cmd[1]
  local m_index
  for i, a in ipairs(cmd) do
    if a == "-m" and cmd[i + 1] == "lsp_complete" then
      m_index = i
    end
  end
  if m_index then
    return run({ exe, "-c", "import lsp_complete; print(lsp_complete.__version__)" }, env)
  end
  local out, e = run({ exe, "--version" }, env)
  if out and out ~= "" then
    return out, nil
  end
  -- Older servers without --version: at least check that `serve --help` runs.
  local help, e2 = run({ exe, "serve", "--help" }, env)
  if help then
    return "unknown (serve --help works)", nil
  end
  return nil, e or e2
end

function M.check()
  start("lsp-complete")

  if vim.fn.has("nvim-0.10") == 1 then
    ok("Neovim " .. tostring(vim.version()))
  else
    err("Neovim 0.10 or newer is needed (inline virtual text)")
  end

  local loaded, plugin = pcall(require, "lsp_complete")
  if not loaded then
    err("require('lsp_complete') failed: " .. tostring(plugin))
    return
  end
  local cfg = plugin.config
  local cmd = cfg.cmd or {}

  if plugin.builtin_available() then
    if cfg.use_builtin then
      ok("using Neovim's built-in vim.lsp.inline_completion")
    else
      info("vim.lsp.inline_completion exists but use_builtin = false: using the plugin's own ghost text")
    end
  else
    ok("using the plugin's own ghost text (no vim.lsp.inline_completion in this Neovim)")
  end

  start("lsp-complete: server")
  local exe = cmd[1]
  if not exe or exe == "" then
    err("setup({ cmd = ... }) has no command")
    return
  end
  if vim.fn.executable(exe) == 1 then
    ok(("server command: %s (%s)"):format(table.concat(cmd, " "), vim.fn.exepath(exe)))
  else
    err(("`%s` is not executable or not on $PATH"):format(exe), {
      "pip install lsp-complete",
      "or setup({ cmd = { '/path/to/venv/bin/lsp-complete', 'serve' } })",
    })
    return
  end
  local version, verr = server_version(cmd, cfg.cmd_env)
  if version then
    ok("server version: " .. version)
  else
    warn("could not get the server version: " .. tostring(verr))
  end

  start("lsp-complete: model")
  local clients = plugin.clients()
  if #clients == 0 then
    info("no lsp-complete client is running: open a source file to start one, then run :checkhealth lsp_complete again")
    return
  end
  local status, serr = plugin.status_sync(5000)
  if not status then
    err("lsp-complete/status failed: " .. tostring(serr))
    return
  end
  local m = status.model or {}
  local desc = ("%s (%s)%s"):format(
    m.name or "?",
    m.path or "?",
    m.device and (" on " .. m.device) or ""
  )
  if m.state == "ready" then
    ok("model ready: " .. desc)
  elseif m.state == "loading" then
    warn("model still loading: " .. desc)
  else
    err(("model state %s: %s"):format(tostring(m.state), desc), {
      "check the server log: :LspLog",
      "lsp-complete models list",
    })
  end
  local recent = status.recent or {}
  if #recent > 0 and recent[#recent].latencyMs then
    info(("last suggestion took %d ms"):format(math.floor(recent[#recent].latencyMs + 0.5)))
  end
  info("suggestions are " .. (plugin.is_enabled() and "on" or "off (:LspCompleteToggle)"))
end

return M
