#!/bin/bash
cd /work/runs/s63/wt
export PYTHONPATH=/work/runs/s63/wt
out=/work/runs/s63/moved-ecc
rm -rf $out
python -m lsp_complete bench --baseline ecc729c --model qwen2.5-coder-0.5b \
  --files $(cat /work/runs/s59/files8.txt) --num-files 8 --spans 2 --span-lines 1,3 \
  --keystrokes 200 --cold-files 0 --humaneval 0 --crossfile 0 \
  --scenarios moved,burst --seed 0 --threads 2 --out $out > $out.log 2>&1
echo done >> $out.log
