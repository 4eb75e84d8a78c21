#!/bin/bash
# The reading probe (probe_read.py) on both models, 4 s and 10 s rests, before (9462d34) and
# after (77df06b), from detached worktrees at /tmp/wt-before and /tmp/wt-after:
#   git worktree add -f --detach /tmp/wt-before 9462d34; git worktree add -f --detach /tmp/wt-after 77df06b
here=$(cd "$(dirname "$0")" && pwd)
M5=~/.cache/lsp-complete/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
M15=~/.cache/lsp-complete/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
F=/usr/lib/python3.11/email/message.py; W=/usr/lib/python3.11/email
for rest in 4 10; do for m in M5 M15; do for side in before after; do
  cd /tmp/wt-$side; echo "== $m rest=$rest $side"
  PYTHONPATH=/tmp/wt-$side timeout 600 python "$here/probe_read.py" ${!m} $F $W 6 $rest 2>&1 | tail -2
done; done; done
