#!/usr/bin/env bash
# usage: run_probe.sh OLD_CHECKOUT NEW_CHECKOUT MODEL N SEED OUTDIR
# One side after the other (quiet machine, nothing else running): OUTDIR/{old,new}.jsonl.
set -u
old=$1; new=$2; model=$3; n=$4; seed=$5; out=$6
probe=$(cd "$(dirname "$0")" && pwd)/probe_read_type.py
mkdir -p "$out"
for side in old new; do
  if [ $side = old ]; then dir=$old; else dir=$new; fi
  (cd "$dir" && PYTHONPATH="$dir" LSP_COMPLETE_NO_DAEMON=1 \
    python "$probe" "$model" "$n" "$seed" "$out/$side.jsonl" > "$out/$side.log" 2>&1)
done
