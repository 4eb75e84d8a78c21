#!/usr/bin/env bash
# One A/B run of this folder: the bench from a detached worktree of commit REV (B) against the
# BASELINES, 16 or 8 one-line spans in 8 languages, 2 threads.
# usage: run.sh REV MODEL NAME SCENARIOS SPANS_PER_FILE SEED BASELINES
set -u
rev=$1 model=$2 name=$3 scenarios=$4 spans=$5 seed=$6 baselines=$7
d=/tmp/lsp-complete-look-$name
git worktree add -f --detach "$d" "$rev" >/dev/null 2>&1 || true
cd "$d" && git checkout -q --detach "$rev"
export PYTHONPATH=$d
python -m lsp_complete bench --model "$model" --threads 2 --baseline "$baselines" \
  --num-files 8 --spans "$spans" --span-lines 1 --keystrokes 160 --seed "$seed" \
  --scenarios "$scenarios" --out "/tmp/lsp-complete-look-$name-out"
