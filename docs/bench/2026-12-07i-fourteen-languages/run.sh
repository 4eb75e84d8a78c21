#!/usr/bin/env bash
# Per-language A/B at a person's pace: HEAD against both releases, 32 files of 14 languages.
set -u
rev=$1 model=$2 name=$3
d=/tmp/lsp-complete-lang-$name
git -C /work/main worktree add -f --detach "$d" "$rev" >/dev/null 2>&1 || true
cd "$d" && git checkout -q --detach "$rev"
export PYTHONPATH=$d
files=$(ls /work/corpus2/*/* | tr '\n' ' ')
python -m lsp_complete bench --model "$model" --threads 2 --baseline 215d7a9,2764f02 \
  --files $files --num-files 32 --spans 1 --span-lines 1 --keystrokes 900 --seed 0 \
  --cold-files 0 --humaneval 0 --crossfile 0 \
  --scenarios "${4:-think,saved}" --out "/tmp/lsp-complete-lang-$name-out"
