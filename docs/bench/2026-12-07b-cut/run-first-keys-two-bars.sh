#!/bin/bash
cd /work/runs/s63/wt
export PYTHONPATH=/work/runs/s63/wt
out=/work/runs/s63/partial-two
rm -rf $out
python -m lsp_complete bench --baseline 5bb2e7d,bench-hide10 --candidate bench-two20 --model qwen2.5-coder-0.5b \
  --files $(ls /work/corpus/*/*) --num-files 23 --spans 1 --span-lines 1 \
  --keystrokes 92 --cold-files 0 --humaneval 0 --crossfile 0 \
  --scenarios moved,burst --seed 0 --threads 2 --out $out > $out.log 2>&1
echo done >> $out.log
