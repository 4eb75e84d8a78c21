#!/bin/bash
cd /work/runs/s63/wt
export PYTHONPATH=/work/runs/s63/wt
m=${1:-qwen2.5-coder-0.5b}; out=/work/runs/s63/typist-two-$m
rm -rf $out
python -m lsp_complete bench --baseline 5bb2e7d,bench-hide10 --candidate bench-two20 --model $m \
  --files $(ls /work/corpus/*/*) --num-files 23 --spans 1 --span-lines 3 \
  --keystrokes 6000 --cold-files 0 --humaneval 0 --crossfile 0 \
  --scenarios saved --seed 0 --threads 2 --out $out > $out.log 2>&1
echo done >> $out.log
