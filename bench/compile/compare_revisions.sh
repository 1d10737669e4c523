#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Compile times of a few representative translation units against flotilla's headers at two
# revisions, alternated run by run so that a drift of the machine's speed hits both alike.
#
#   bench/compile/compare_revisions.sh BEFORE [AFTER] [RUNS]
#
# BEFORE and AFTER are git revisions (AFTER: the working tree when left out or given as "."); RUNS
# defaults to 3. The units' sources are those of the working tree, compiled against each
# revision's include/ and single_include/. Prints one line per compile and a table of the means.
# UNITS (a space-separated list of the names below) compiles only those.
# Needs g++ and Eigen (scripts/install-deps.sh).
set -euo pipefail
cd "$(dirname "$0")/../.."

before=${1:?usage: $0 BEFORE [AFTER] [RUNS]}
after=${2:-.}
runs=${3:-3}
cxx=${CXX:-g++}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tree() {  # tree REV DIR: DIR/include and DIR/single_include at REV ("." is the working tree)
  mkdir -p "$2"
  if [ "$1" = . ]; then
    cp -r include single_include "$2/"
  else
    git archive "$1" include single_include | tar -x -C "$2"
  fi
}
tree "$before" "$work/before"
tree "$after" "$work/after"

printf '#include <flotilla/flotilla.hpp>\n' > "$work/umbrella.cpp"
printf '#include <flotilla/nn/dense.hpp>\n#include <flotilla/nn/dense.hpp>\n' > "$work/dense_check.cpp"

common=(-std=gnu++20 -isystem /usr/include/eigen3 -DNDEBUG)
names=(umbrella_syntax_O1 dense_header_check_O1 consumer_main_O0_g mlp_O1_separate mlp_O3_native_separate
       cnn_single_header_O1 cnn_O3_native_separate)
flags=(
  "-O1 -fsyntax-only $work/umbrella.cpp"
  "-O1 -c $work/dense_check.cpp -o $work/unit.o"
  "-O0 -g -c tests/consumers/main.cpp -o $work/unit.o"
  "-O1 -DFLOTILLA_SEPARATE_COMPILATION -c examples/fashion_mnist_mlp.cpp -o $work/unit.o"
  "-O3 -march=native -DFLOTILLA_SEPARATE_COMPILATION -c examples/fashion_mnist_mlp.cpp -o $work/unit.o"
  "-O1 -c bench/compile/single_header_cnn.cpp -o $work/unit.o"
  "-O3 -march=native -DFLOTILLA_SEPARATE_COMPILATION -c examples/fashion_mnist_cnn.cpp -o $work/unit.o"
)
# UNITS="name ..." compiles those units alone.
if [ -n "${UNITS:-}" ]; then
  keep_names=() keep_flags=()
  for i in "${!names[@]}"; do
    case " $UNITS " in *" ${names[$i]} "*) keep_names+=("${names[$i]}"); keep_flags+=("${flags[$i]}") ;; esac
  done
  names=("${keep_names[@]}") flags=("${keep_flags[@]}")
fi

results=$work/results.txt
for i in "${!names[@]}"; do
  for _ in $(seq "$runs"); do
    for side in before after; do
      # shellcheck disable=SC2086  # the unit's flags are split on purpose
      /usr/bin/time -f "%e" -o "$work/seconds" "$cxx" "${common[@]}" -I"$work/$side/include" \
        -I"$work/$side/single_include" ${flags[$i]} > /dev/null 2> "$work/err" || { cat "$work/err"; exit 1; }
      echo "${names[$i]} $side $(tail -1 "$work/seconds")" | tee -a "$results"
    done
  done
done

echo
echo "| unit | $before (s, mean of $runs) | $after (s, mean of $runs) |"
echo "|---|---|---|"
for name in "${names[@]}"; do
  awk -v n="$name" '$1 == n { s[$2] += $3; c[$2]++ }
      END { printf "| %s | %.2f | %.2f |\n", n, s["before"] / c["before"], s["after"] / c["after"] }' "$results"
done
