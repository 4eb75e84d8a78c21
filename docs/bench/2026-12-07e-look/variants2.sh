#!/usr/bin/env bash
# The arrival plan's variants side by side: B = P2 (look cut first), A1 = P0 (window first),
# A2 = P1 (small cut first), A3 = 215d7a9; the announced new spot with a 1 s look.
set -u
rev=${1:-HEAD}
d=/work/runs/s66/src4
git -C /work/main worktree add -f --detach $d $rev >/dev/null 2>&1 || true
cd $d && git checkout -q --detach $(git -C /work/main rev-parse $rev)
export PYTHONPATH=$d
start=$(date +%s)
python -m lsp_complete bench --model ${2:-qwen2.5-coder-0.5b} --threads 2 \
  --baseline ${6:-4e1143d,215d7a9} \
  --num-files 8 --spans 2 --span-lines 1 --keystrokes 160 --seed ${3:-0} \
  --scenarios ${4:-ours:moved-look,highlight:moved-look} \
  --out /work/runs/s66/${5:-variants}-out > /work/runs/s66/${5:-variants}.log 2>&1
echo "rc $? elapsed $(( $(date +%s) - start )) s" >> /work/runs/s66/${5:-variants}.log
