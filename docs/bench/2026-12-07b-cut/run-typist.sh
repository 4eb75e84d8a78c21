#!/bin/bash
cd /work/runs/s63/wt
export PYTHONPATH=/work/runs/s63/wt
m=${1:-qwen2.5-coder-0.5b}; out=/work/runs/s63/typist-$m-s${2:-0}; seed=${2:-0}
rm -rf $out
python -m lsp_complete bench --baseline b0c1d7d,215d7a9,2764f02 --candidate bench-cut10 --model $m \
  --files $(ls /work/corpus/*/*) --num-files 23 --spans 1 --span-lines 3 \
  --keystrokes 6000 --cold-files 0 --humaneval 0 --crossfile 0 \
  --scenarios saved --seed $seed --threads 2 --out $out > $out.log 2>&1
echo done >> $out.log
