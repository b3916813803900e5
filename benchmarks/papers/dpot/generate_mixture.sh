#!/bin/bash
# The DPOT pre-training mixture at 64^2 (issue 28): 240 trajectories per member (200 train, 20 validation,
# 20 test), each written by `opformer generate` into data/mixture/. Resumable: run it again after a kill and
# every member continues from its finished chunks; finished members are skipped. A line per member goes to
# data/mixture/generation.log (start, end, seconds, load averages), which benchmarks/papers/dpot/mixture_data.py reads.
#
#   bash benchmarks/papers/dpot/generate_mixture.sh [MEMBER ...]   # default: all, in this order
set -u
OUT=${OUT:-data/mixture}
N=${N:-240}
PY=${PY:-.venv/bin/python}
mkdir -p "$OUT"
declare -A ARGS=(
  [fno_nu1e-3]="navier-stokes --nu 1e-3 --t-final 50"
  # at 128^2 the default step (1.28 / 128 = 0.01) exceeds the CFL limit for nu = 1e-4 (1.02 before t = 27)
  [fno_nu1e-4]="navier-stokes --nu 1e-4 --t-final 30 --solve-resolution 128 --dt 0.005"
  [fno_nu1e-5]="navier-stokes --nu 1e-5 --t-final 20 --solve-resolution 128"
  [dr]="diffusion-reaction"
  [swe]="shallow-water"
  [cns_m1_eta0.1]="compressible-ns --mach 1 --eta 0.1"
  [smoke]="smoke --solve-resolution 128"
  [smoke_conditioned]="smoke-conditioned --solve-resolution 128"
)
MEMBERS=(dr swe fno_nu1e-3 smoke smoke_conditioned cns_m1_eta0.1 fno_nu1e-4 fno_nu1e-5)
[ $# -gt 0 ] && MEMBERS=("$@")
load() { cut -d' ' -f1-3 /proc/loadavg; }
for member in "${MEMBERS[@]}"; do
  [ -n "${ARGS[$member]:-}" ] || { echo "unknown member $member (one of ${!ARGS[*]})" >&2; exit 2; }
  file="$OUT/$member.h5"
  [ -f "$file" ] && { echo "skip $file (exists)"; continue; }
  start=$(date +%s); load_start=$(load)
  # shellcheck disable=SC2086
  $PY -m opformer generate ${ARGS[$member]} --samples "$N" --resolution 64 --seed 0 --out "$file" || exit $?
  echo "$member seconds $(( $(date +%s) - start )) load_start $load_start load_end $(load) samples $N" \
    >> "$OUT/generation.log"
done
