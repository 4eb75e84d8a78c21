#!/usr/bin/env bash
# The final code: the highlight client at a new spot and while typing (think, the typist),
# against main's start and both releases, 0.5B (or $2), from a detached worktree.
set -u
rev=${1:-HEAD}
model=${2:-qwen2.5-coder-0.5b}
name=${3:-run2}
scen=${4:-highlight:moved-look,moved-look,highlight:saved,saved}
spans=${5:-2}
d=/work/runs/s66/src5
git -C /work/main worktree add -f --detach $d $rev >/dev/null 2>&1 || true
cd $d && git checkout -q --detach $(git -C /work/main rev-parse $rev)
export PYTHONPATH=$d
start=$(date +%s)
python -m lsp_complete bench --model $model --threads 2 \
  --baseline 2ef32b5,215d7a9,2764f02 \
  --num-files 8 --spans $spans --span-lines 1 --keystrokes 160 --seed 1 \
  --scenarios $scen \
  --out /work/runs/s66/$name-out > /work/runs/s66/$name.log 2>&1
echo "rc $? elapsed $(( $(date +%s) - start )) s" >> /work/runs/s66/$name.log
