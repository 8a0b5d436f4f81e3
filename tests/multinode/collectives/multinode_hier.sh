#!/bin/bash
# Hierarchical collectives across three network-namespace hosts (tests/multinode/lib/netns.sh),
# over Open MPI's TCP BTL between hosts:
#   1. 3 hosts x 2 ranks, default GPURUN_COLL_ALGO (auto), with a timeout: test_coll_hier exact;
#      the world communicator must have taken the hierarchical path on all 6 ranks, the split by
#      node (all ranks on one node) and the split by local rank (one rank per node) must not;
#      a copy of the world split with GPURUN_COLL_ALGO=hier (split-3) runs reduce, allgather and
#      reduce-scatter hierarchically (ranks numbered node by node: allgather lands in place).
#   2. 3 + 1 + 2 ranks (one rank alone on n1), mapped round robin over the hosts (--map-by node:
#      n0 has ranks 0, 3, 5, n1 rank 1, n2 ranks 2, 4, so no node's ranks are contiguous and the
#      node blocks of allgather and reduce-scatter are padded), GPURUN_COLL_ALGO=hier, no timeout:
#      the same, and reduce, allgather and reduce-scatter must have taken the hierarchical path.
#   3. 3 hosts x 2 ranks, GPURUN_COLL_ALGO=flat: exact (the world only, small sizes: the flat
#      algorithms have tests of their own), and no communicator hierarchical.
#   4. 3 hosts x 2 ranks, GPURUN_COLL_ALGO=hier everywhere but flat on rank 3: every rank must
#      take the same path (the lowest setting, flat: no hierarchy anywhere), and say why.
#   5. 3 hosts x 2 ranks, GPURUN_COLL_ALGO=hier, rank 3 (not a leader) SIGKILLed inside a stream
#      of reduces, allgathers, reduce-scatters and allreduces, reduce first (mpirun
#      --enable-recovery keeps the others): all five survivors return GR_ERR_TIMEOUT from the call
#      they were in, naming the hierarchical kind, the one on its node naming it as gone.
#   6. the same with rank 4 (n2's leader) killed, allgather first.
#   7. the multi-leader allreduce (GPURUN_COLL_ALGO=hier-ml, mpi_path_hier_ml.c): rank 3 (not a
#      leader) and then rank 4 (n2's leader) SIGKILLed inside its allreduce (allreduce first): all
#      five survivors return GR_ERR_TIMEOUT from it, naming the multi-leader allreduce, the one on
#      the victim's node naming the victim as gone.
#   8. hier-ml exact at 3 hosts x 2 ranks and 2 hosts x 2 ranks (the world's allreduces must take
#      the multi-leader row), and at 3 + 1 + 2 ranks, where the nodes differ in size and no
#      allreduce may take it (the hierarchical row runs them); and at 3 x 2 without a timeout
#      (--quick: the world only).
#   multinode_hier.sh MPIRUN TEST_COLL_HIER [full|sanitized]
# sanitized (the ASan/UBSan build): 3 and 4 are left out (they check the choice of path, which the
# release build covers, and each mpirun start costs ~15 s under the sanitizers on this machine).
set -u
MPIRUN=$1 EXE=$2 MODE=${3:-full}
. "$(dirname "$0")/../lib/netns.sh"
fail() { echo "FAIL: $*"; exit 1; }
command -v "$MPIRUN" >/dev/null 2>&1 || { echo "SKIP: no $MPIRUN"; exit 77; }
netns_start 3
D=$NETNS_DIR
export GPURUN_LOG=debug GPURUN_MONITOR_DIR=$D/monitor
MCA=(--mca pml ob1 --mca btl tcp,vader,self -x GPURUN_LOG -x GPURUN_MONITOR_DIR -x HIER_TEST_DIR)

# run NAME HOSTS NP [mpirun args...] -- [program args...]   (WRAP: a sh -c script that gets the
# program as $0 and execs it)
run() {
  local name=$1 hosts=$2 np=$3
  shift 3
  local margs=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do margs+=("$1"); shift; done
  shift
  export HIER_TEST_DIR=$D/$name
  mkdir -p "$HIER_TEST_DIR"
  local t0; t0=$(date +%s.%N)
  NETNS_TIMEOUT=${RUN_TIMEOUT:-100} netns_mpirun --host "$hosts" -np "$np" "${MCA[@]}" "${margs[@]}" \
    ${WRAP:+sh -c "$WRAP"} "$EXE" "$@" >"$D/$name.out" 2>&1
  RC=$?
  grep -v '\] debug: ' "$D/$name.out" | head -n 40
  echo "($name: exit $RC after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s)"
}
# count NAME PATTERN: lines of NAME's output matching PATTERN
count() { grep -c -- "$2" "$D/$1.out"; }

check_exact() {
  local name=$1 np=$2 want_hier=$3 want_shm=${4:-$2}
  [ "$RC" = 0 ] || fail "$name: exit $RC"
  grep -q "hier exact at $np ranks.*, 0 failures" "$D/$name.out" || fail "$name: no clean summary"
  # allreduces that took the hierarchical path (over all ranks): some exactly when it exists
  local n; n=$(sed -n 's/.* failures, \([0-9]*\) hierarchical allreduces$/\1/p' "$D/$name.out")
  [ -n "$n" ] || fail "$name: no count of hierarchical allreduces"
  if [ "$want_hier" = 0 ]; then [ "$n" = 0 ] || fail "$name: $n allreduces took the hierarchical path";
  else [ "$n" -gt 0 ] || fail "$name: no allreduce took the hierarchical path"; fi
  local h; h=$(count "$name" 'communicator world\[[0-9.]*]: hierarchical (3 nodes')
  [ "$h" = "$want_hier" ] || fail "$name: $h rank(s) said the world communicator is hierarchical, expected $want_hier"
  # the splits by node (split-1) and by local rank (split-2): never hierarchical
  h=$(count "$name" 'communicator split-[12]:[0-9]*\[[0-9.]*]: hierarchical')
  [ "$h" = 0 ] || fail "$name: $h split communicator(s) on one node or one rank per node took the hierarchical path"
  if [ "$want_hier" != 0 ]; then
    h=$(count "$name" 'communicator split-1:[0-9]*\[[0-9.]*]: shared-memory path')
    [ "$h" = "$want_shm" ] || fail "$name: $h ranks (expected $want_shm) had the shared-memory path on their node's communicator"
  fi
}

run auto_3x2 n0:2,n1:2,n2:2 6 -- exact
check_exact auto_3x2 6 6
grep -q 'hierarchical calls of the other kinds: reduce [1-9][0-9]*, allgather [1-9][0-9]*, reduce_scatter [1-9][0-9]*$' \
  "$D/auto_3x2.out" || fail "auto_3x2: reduce, allgather or reduce-scatter did not take the hierarchical path"
[ "$(count auto_3x2 'communicator split-3:[0-9]*\[[0-9.]*]: hierarchical (3 nodes.*GPURUN_COLL_ALGO=hier)')" = 6 ] ||
  fail "auto_3x2: the copy split with GPURUN_COLL_ALGO=hier is not hierarchical on all 6 ranks"
h=$(count auto_3x2 'communicator split-2:[0-9]*\[[0-9.]*]: no hierarchy (3 node(s), at most 1 rank(s) on one)')
[ "$h" = 6 ] || fail "auto_3x2: $h of 6 ranks said the one-rank-per-node split has no hierarchy"

run hier_3_1_2 n0:3,n1:1,n2:2 6 --map-by node -x GPURUN_COLL_ALGO=hier -- exact --no-timeout
check_exact hier_3_1_2 6 6 5
grep -q 'communicator world\[[0-9.]*]: hierarchical (3 nodes, this node n1 has 1 rank(s), leader rank 1;' \
  "$D/hier_3_1_2.out" || fail "hier_3_1_2: rank 1 is not alone on n1"
[ "$(count hier_3_1_2 'this node n2 has 2 rank(s), leader rank 2;')" = 2 ] ||
  fail "hier_3_1_2: n2's ranks are not 2 and 4 (the layout is not interleaved)"
grep -q 'hierarchical calls of the other kinds: reduce [1-9][0-9]*, allgather [1-9][0-9]*, reduce_scatter [1-9][0-9]*$' \
  "$D/hier_3_1_2.out" || fail "hier_3_1_2: reduce, allgather or reduce-scatter did not take the hierarchical path"

if [ "$MODE" != sanitized ]; then
  run flat_3x2 n0:2,n1:2,n2:2 6 -x GPURUN_COLL_ALGO=flat -- exact --quick
  check_exact flat_3x2 6 0
  grep -q 'hierarchical calls of the other kinds: reduce 0, allgather 0, reduce_scatter 0$' \
    "$D/flat_3x2.out" || fail "flat_3x2: a reduce, allgather or reduce-scatter took the hierarchical path"

  # ranks that disagree on GPURUN_COLL_ALGO: all take the lowest (flat), none hangs
  WRAP='[ "${OMPI_COMM_WORLD_RANK:-$PMI_RANK}" = 3 ] && export GPURUN_COLL_ALGO=flat; exec "$0" "$@"' \
    run mixed_3x2 n0:2,n1:2,n2:2 6 -x GPURUN_COLL_ALGO=hier -- exact --quick
  [ "$RC" = 0 ] || fail "mixed_3x2: exit $RC"
  grep -q "hier exact at 6 ranks.*, 0 failures, 0 hierarchical allreduces" "$D/mixed_3x2.out" ||
    fail "mixed_3x2: no clean summary with 0 hierarchical allreduces"
  [ "$(count mixed_3x2 'communicator world\[[0-9.]*]: hierarchical')" = 0 ] ||
    fail "mixed_3x2: a rank took the hierarchical path although rank 3 asked for flat"
  grep -q 'GPURUN_COLL_ALGO differs between the ranks of communicator world\[[0-9.]*] (from flat to hier); all use flat' \
    "$D/mixed_3x2.out" || fail "mixed_3x2: no warning that the settings differ"
fi

# The survivors leave without MPI_Finalize (which can wait for the dead rank for ever), but mpirun
# in recovery mode may linger: once all five have reported (or 60 s), it is stopped.
# kill_case NAME VICTIM FIRST
kill_case() {
  local name=$1 victim=$2
  RUN_TIMEOUT=60 run "$name" n0:2,n1:2,n2:2 6 --enable-recovery -x GPURUN_COLL_ALGO=${ALGO:-hier} -- kill "$victim" "$3" &
  local run_pid=$!
  for _ in $(seq 600); do
    [ "$(grep -c 'SURVIVOR' "$D/$name.out" 2>/dev/null)" = 5 ] && break
    kill -0 $run_pid 2>/dev/null || break
    sleep 0.1
  done
  for _ in $(seq 30); do kill -0 $run_pid 2>/dev/null || break; sleep 0.1; done
  pkill -TERM -P $run_pid 2>/dev/null # the timeout wrapper around mpirun, if still there
  wait $run_pid
  local ok; ok=$(count "$name" 'SURVIVOR OK')
  [ "$ok" = 5 ] || fail "$name: $ok of 5 survivors ended with GR_ERR_TIMEOUT as expected"
  grep 'on the victim.s node): SURVIVOR OK' "$D/$name.out" | grep -q "rank $victim (process [0-9]* no longer exists" ||
    fail "$name: the victim's node-mate did not name it as gone"
}
kill_case kill_3x2 3 0
kill_case kill_leader_3x2 4 1
grep -q 'SURVIVOR OK.*hierarchical allgather' "$D/kill_leader_3x2.out" ||
  fail "kill_leader_3x2: no survivor failed inside the hierarchical allgather"

# the multi-leader allreduce: a killed rank and a killed leader inside it (allreduce first)
ALGO=hier-ml kill_case kill_ml_3x2 3 3
ALGO=hier-ml kill_case kill_ml_leader_3x2 4 3
for name in kill_ml_3x2 kill_ml_leader_3x2; do
  [ "$(count $name 'SURVIVOR OK.*hierarchical allreduce (multi-leader')" = 5 ] ||
    fail "$name: not every survivor failed inside the multi-leader allreduce"
done

# ml_exact NAME HOSTS NP WANT [mpirun args...]: exact under hier-ml; WANT 1: the world's
# allreduces took the multi-leader row, 0: none did
ml_exact() {
  local name=$1 hosts=$2 np=$3 want=$4
  shift 4
  run "$name" "$hosts" "$np" "$@" -x GPURUN_COLL_ALGO=hier-ml -- exact ${ML_ARGS:-}
  [ "$RC" = 0 ] || fail "$name: exit $RC"
  grep -q "hier exact at $np ranks.*, 0 failures" "$D/$name.out" || fail "$name: no clean summary"
  local n; n=$(sed -n 's/^multi-leader allreduces \([0-9]*\)$/\1/p' "$D/$name.out")
  [ -n "$n" ] || fail "$name: no count of multi-leader allreduces"
  if [ "$want" = 0 ]; then [ "$n" = 0 ] || fail "$name: $n allreduces took the multi-leader row";
  else [ "$n" -gt 0 ] || fail "$name: no allreduce took the multi-leader row"; fi
}
ml_exact ml_3x2 n0:2,n1:2,n2:2 6 1
ml_exact ml_2x2 n0:2,n1:2 4 1
ml_exact ml_3_1_2 n0:3,n1:1,n2:2 6 0 --map-by node
ML_ARGS="--no-timeout --quick" ml_exact ml_3x2_no_timeout n0:2,n1:2,n2:2 6 1
echo "PASS ($MODE): hierarchical collectives exact at 3x2 and 3+1+2 ranks, a killed rank and a killed leader named (hier and hier-ml), hier-ml exact at 3x2 and 2x2 and not taken at 3+1+2$([ "$MODE" = sanitized ] || echo ", flat when asked, the lowest setting when ranks differ")"
