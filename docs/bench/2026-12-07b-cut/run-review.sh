#!/bin/bash
cd /work/runs/s63/rev
export PYTHONPATH=/work/runs/s63/rev
out=/work/runs/s63/rev05
rm -rf $out
python -m lsp_complete bench --baseline 6576707,215d7a9,2764f02 --model qwen2.5-coder-0.5b \
  --files $(cat /work/runs/s59/files8.txt) --num-files 8 --spans 1 --span-lines 1,3 \
  --keystrokes 100 --cold-files 2 --humaneval 0 --crossfile 0 \
  --scenarios moved,burst,saved,busy,open --seed 0 --threads 2 --out $out > $out.log 2>&1
echo done >> $out.log
