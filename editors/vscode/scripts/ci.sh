#!/usr/bin/env bash
# Build, test and package the VS Code extension: the same steps a developer runs.
# Usage: bash editors/vscode/scripts/ci.sh   (from anywhere)
set -euo pipefail
cd "$(dirname "$0")/.."
npm ci --no-audit --no-fund
npm run compile
npm test
npx --no-install @vscode/vsce package --allow-missing-repository --no-rewrite-relative-links \
  --out lsp-complete.vsix
ls -l lsp-complete.vsix
