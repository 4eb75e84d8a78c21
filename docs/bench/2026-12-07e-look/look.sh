#!/usr/bin/env bash
# moved / moved-look with the generic, highlight and ours clients: HEAD against main's start
# and both releases, 0.5B, from a detached worktree.
set -u
rev=${1:-HEAD}
d=/work/runs/s66/src
git -C /work/main worktree add -f --detach $d $rev >/dev/null 2>&1 || true
cd $d && git checkout -q --detach $(git -C /work/main rev-parse $rev)
export PYTHONPATH=$d
start=$(date +%s)
python -m lsp_complete bench --model qwen2.5-coder-0.5b --threads 2 \
  --baseline 2ef32b5,215d7a9,2764f02 \
  --num-files 8 --spans 2 --span-lines 1 --keystrokes 160 --seed 0 \
  --scenarios moved,moved-look,highlight:moved-look,ours:moved-look,burst \
  --out /work/runs/s66/look-out > /work/runs/s66/look.log 2>&1
echo "rc $? elapsed $(( $(date +%s) - start )) s" >> /work/runs/s66/look.log
