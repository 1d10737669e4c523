# Sourced by the cluster tests (run inside scripts/cluster.sh): the hosts, and TCP jobs of two
# ranks a host, each bound to its host's address with the job's secret.
#
#   cluster_setup WORKDIR        sets hosts (addresses), n (ranks: two a host), work; makes
#                                WORKDIR afresh with the job's secret in $work/secret
#   start_tcp_ranks NAME [VAR=value...] -- PROGRAM ARGS...
#                                starts the n ranks (rank r on host r / 2) with the job's variables
#                                and these; their pids in `pids`, their output in $work/NAME.rankR.log

cluster_setup() {
  work="$1"
  read -r -a hosts <<< "$FLOTILLA_CLUSTER_HOSTS"
  n=$(( ${#hosts[@]} * 2 ))
  rm -rf "$work" && mkdir -p "$work"
  head -c 32 /dev/urandom | base64 > "$work/secret" && chmod 600 "$work/secret"
}

start_tcp_ranks() {
  local name="$1"; shift
  local extra=()
  while [ "$1" != "--" ]; do extra+=("$1"); shift; done
  shift
  pids=()
  for ((r = 0; r < n; r++)); do
    local h=$(( r / 2 ))
    "$FLOTILLA_CLUSTER_RUN" "$h" env FLOTILLA_WORLD_SIZE=$n FLOTILLA_COORDINATOR="${hosts[0]}:29500" \
      FLOTILLA_SECRET_FILE="$work/secret" FLOTILLA_RANK=$r FLOTILLA_BIND="${hosts[$h]}" "${extra[@]}" "$@" \
      > "$work/$name.rank$r.log" 2>&1 &
    pids+=($!)
  done
}
