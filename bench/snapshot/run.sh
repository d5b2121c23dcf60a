#!/usr/bin/env bash
# Snapshot benchmark: akactl snapshot create/extract against tar --sort=name | zstd -3 and
# zstd -d | tar -x on a generated ~200 MiB / 5 000-file workspace. Prints medians, MiB/s,
# compression ratios and akactl/tar time ratios. It measures; it never fails on slow figures.
#
#   bench/snapshot/run.sh [BUILD_DIR]      (default: build; needs akactl and snapshot_gen_workspace)
#   RUNS=5 WORK=/some/dir bench/snapshot/run.sh
set -euo pipefail

BUILD=${1:-build}
RUNS=${RUNS:-5}
AKACTL=$BUILD/cli/akactl
GEN=$BUILD/bench/snapshot/snapshot_gen_workspace
for bin in "$AKACTL" "$GEN"; do
  [[ -x $bin ]] || { echo "missing $bin: cmake --build $BUILD --target akactl snapshot_gen_workspace" >&2; exit 2; }
done
mkdir -p "${WORK:-/tmp}"
WORK=$(mktemp -d "${WORK:-/tmp}/akasnap-bench-XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "generating workspace in $WORK/ws ..."
CONTENT=$("$GEN" "$WORK/ws")
FILES=$(find "$WORK/ws" -type f | wc -l)
echo "workspace: $FILES files, $CONTENT content bytes ($(awk -v b="$CONTENT" 'BEGIN{printf "%.1f", b/1048576}') MiB), $(nproc) CPUs, zstd $(zstd -V | grep -o 'v[0-9.]*')"

now() { date +%s.%N; }
# time_cmd VAR cmd... : appends the command's wall time to the array named VAR
time_cmd() {
  local -n acc=$1; shift
  sync
  local t0 t1
  t0=$(now); "$@"; t1=$(now)
  acc+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.4f", b-a}')")
}
median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END{ if (NR%2) print v[(NR+1)/2]; else printf "%.4f\n", (v[NR/2]+v[NR/2+1])/2 }'; }

aka_create() { "$AKACTL" snapshot create "$WORK/ws" -o "$WORK/aka.tar.zst" >/dev/null; }
aka_create2() { "$AKACTL" snapshot create "$WORK/ws" -o "$WORK/aka2.tar.zst" --zstd-level 2 >/dev/null; }
tar_create() { tar -c --sort=name -C "$WORK/ws" . | zstd -3 -q -f -o "$WORK/tar.tar.zst"; }

# Warm the page cache once for both, then alternate so that drift hits both equally.
aka_create; tar_create; aka_create2
AC=(); TC=(); AC2=(); AX=(); TX=()
for ((i = 0; i < RUNS; i++)); do
  time_cmd AC aka_create
  time_cmd TC tar_create
  time_cmd AC2 aka_create2
done

for ((i = 0; i < RUNS; i++)); do
  # removing the previous trees is not timed
  rm -rf "$WORK/x-aka" "$WORK/x-tar"; mkdir "$WORK/x-tar"; sync
  time_cmd AX "$AKACTL" snapshot extract "$WORK/aka.tar.zst" "$WORK/x-aka"
  time_cmd TX sh -c "zstd -d -q -c '$WORK/tar.tar.zst' | tar -x -C '$WORK/x-tar'"
done >/dev/null
diff -r "$WORK/ws" "$WORK/x-aka" >/dev/null || { echo "extracted tree differs from the workspace!" >&2; exit 1; }

ac2=$(median "${AC2[@]}"); asz2=$(stat -c %s "$WORK/aka2.tar.zst")
ac=$(median "${AC[@]}"); tc=$(median "${TC[@]}"); ax=$(median "${AX[@]}"); tx=$(median "${TX[@]}")
asz=$(stat -c %s "$WORK/aka.tar.zst"); tsz=$(stat -c %s "$WORK/tar.tar.zst")
awk -v C="$CONTENT" -v ac2="$ac2" -v asz2="$asz2" -v ac="$ac" -v tc="$tc" -v ax="$ax" -v tx="$tx" -v asz="$asz" -v tsz="$tsz" -v runs="$RUNS" 'BEGIN {
  mib = C / 1048576
  printf "\n%-28s %10s %10s %12s\n", "median of " runs " runs", "wall s", "MiB/s", "ratio"
  printf "%-28s %10.3f %10.1f %12.3f\n", "akactl snapshot create", ac, mib/ac, C/asz
  printf "%-28s %10.3f %10.1f %12.3f\n", "tar --sort=name | zstd -3", tc, mib/tc, C/tsz
  printf "%-28s %10.3f %10.1f %12.3f\n", "akactl create --zstd-level 2", ac2, mib/ac2, C/asz2
  printf "%-28s %10.3f %10.1f\n", "akactl snapshot extract", ax, mib/ax
  printf "%-28s %10.3f %10.1f\n", "zstd -d | tar -x", tx, mib/tx
  printf "\ncreate  time akactl/tar+zstd: %.2fx (target <= 1.00x); size akactl/tar+zstd: %.4fx\n", ac/tc, asz/tsz
  printf "create  time akactl(level 2)/tar+zstd: %.2fx; size: %.4fx\n", ac2/tc, asz2/tsz
  printf "extract time akactl/zstd|tar: %.2fx (target <= 1.00x)\n", ax/tx
}'
echo "raw create  akactl: ${AC[*]}"
echo "raw create  tar:    ${TC[*]}"
echo "raw create  aka L2: ${AC2[*]}"
echo "raw extract akactl: ${AX[*]}"
echo "raw extract tar:    ${TX[*]}"
