#!/usr/bin/env bash
# side_by_side.sh PROGRAM FILTER... : runs the gtest PROGRAM once per filter, all at once (each
# process starts a daemon of its own), and fails if any of them fails. Each one's output is
# printed whole after all have ended, in the order of the filters; a last line says so when
# every process skipped its tests (and none failed).
set -uo pipefail
program=$1
shift
(($# > 0)) || { echo "side_by_side.sh: no gtest filter given" >&2; exit 2; }
out=$(mktemp -d /tmp/akad-side-by-side.XXXXXX)
pids=()
trap 'rm -rf "$out"' EXIT
# Stopped (ctest's timeout, ^C): the processes it started go too, by their pids.
trap '((${#pids[@]})) && kill -TERM "${pids[@]}" 2>/dev/null; wait; exit 143' TERM INT
for ((i = 1; i <= $#; i++)); do
  "$program" --gtest_filter="${!i}" >"$out/$i.txt" 2>&1 &
  pids+=($!)
done
rc=0
skipped=0
for ((i = 1; i <= $#; i++)); do
  status=0
  wait "${pids[i - 1]}" || status=$?
  echo "===== $program --gtest_filter='${!i}' exited $status"
  cat "$out/$i.txt"
  ((status == 0)) || rc=1
  grep -q '^\[  SKIPPED \] .* tests\?, listed below' "$out/$i.txt" && ((skipped += 1))
done
# For ctest's SKIP_REGULAR_EXPRESSION: said only when every process passed and skipped its tests.
((rc == 0 && skipped == $#)) && echo "side_by_side.sh: every process skipped its tests"
exit "$rc"
