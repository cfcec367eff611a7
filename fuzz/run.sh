#!/bin/sh
# Run one fuzz target for SECONDS at the lowest CPU priority, with the campaign's limits:
#   fuzz/run.sh TARGET SECONDS [extra libFuzzer flags]
# Per engine call at most 1 s and per compile 2 s of thread CPU time (fuzz/src/lib.rs,
# CALL_BUDGET and COMPILE_BUDGET: wall time lies on a shared machine), per input at most 300 s
# of wall time (-timeout, a backstop) and 2 GB (-rss_limit_mb): a slower or bigger call is a
# finding (a crash-*/timeout-*/oom-* file in fuzz/artifacts/TARGET/).
set -eu
cd "$(dirname "$0")"
t=$1 secs=$2
shift 2
mkdir -p "corpus/$t" "seeds/$t"
# The structure-aware targets read an `arbitrary` AST: let inputs be long from the start
# (libFuzzer's length control would keep them to a few bytes for the first thousands of runs).
case "$t" in
  schema_structured|engine_oracle|regex_compile) len="-len_control=0 -max_len=512" ;;
  *) len="-max_len=4096" ;;
esac
exec nice -n 19 /usr/bin/time -f 'time: cpu_user_s=%U cpu_sys_s=%S wall_s=%e maxrss_kb=%M' cargo +nightly fuzz run -s none -a "$t" "corpus/$t" "seeds/$t" -- \
  -max_total_time="$secs" -timeout=300 -rss_limit_mb=2048 $len \
  -print_final_stats=1 "$@"
