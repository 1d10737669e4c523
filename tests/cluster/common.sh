# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
# Sourced by the cluster tests (run inside scripts/cluster.sh): the hosts, and TCP jobs of two
# ranks a host, each bound to its host's address with a secret.
#
#   cluster_setup WORKDIR        sets hosts (addresses), n (ranks: two a host), work; makes
#                                WORKDIR afresh with the job's secret in $work/secret
#   tcp_rank R SECRET_FILE [VAR=value...] -- PROGRAM ARGS...
#                                runs rank R of the job (on host R / 2) with that secret, the job's
#                                variables and these, in the foreground
#   start_tcp_ranks NAME [VAR=value...] -- PROGRAM ARGS...
#                                starts the n ranks with the job's secret; their pids in `pids`,
#                                their output in $work/NAME.rankR.log

cluster_setup() {
  work="$1"
  read -r -a hosts <<< "$FLOTILLA_CLUSTER_HOSTS"
  n=$(( ${#hosts[@]} * 2 ))
  rm -rf "$work" && mkdir -p "$work"
  head -c 32 /dev/urandom | base64 > "$work/secret" && chmod 600 "$work/secret"
}

tcp_rank() {
  local r="$1" secret="$2"; shift 2
  local h=$(( r / 2 )) extra=()
  while [ "$1" != "--" ]; do extra+=("$1"); shift; done
  shift
  "$FLOTILLA_CLUSTER_RUN" "$h" env FLOTILLA_WORLD_SIZE=$n FLOTILLA_COORDINATOR="${hosts[0]}:29500" FLOTILLA_RANK=$r \
    FLOTILLA_BIND="${hosts[$h]}" FLOTILLA_SECRET_FILE="$secret" "${extra[@]}" "$@"
}

start_tcp_ranks() {
  local name="$1"; shift
  pids=()
  for ((r = 0; r < n; r++)); do
    tcp_rank $r "$work/secret" "$@" > "$work/$name.rank$r.log" 2>&1 &
    pids+=($!)
  done
}
