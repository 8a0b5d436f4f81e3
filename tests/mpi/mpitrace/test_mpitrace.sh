#!/bin/sh
# The MPI layer (libgpurun-mpi.so) on plain MPI programs under real mpirun and gpurun:
#   results   every kind of call gives the same results traced as plain; MPI_THREAD_MULTIPLE
#   idup      communicators made by MPI_Comm_idup get the same id on every rank, their calls
#             recorded under it
#   bigcount  MPI 4.0's big-count calls (MPI_Allreduce_c ...; MPICH 4, not Open MPI 4.1): the same
#             results traced as plain, each call in the flight recorders with its count
#   names     gpurun-top names the rank in a receive nobody sends to, from the layer's live files
#   timeout   --timeout: one verdict naming the late rank, every rank's flight recorder; with
#             --on-hang abort the job ends with MPI_Abort's 125
#   fortran   a `use mpi` and a `use mpi_f08` program (mpif90), a late rank named by the verdict;
#             f08_cases.F90 (every kind of call through mpi_f08) and use_mpi_cases.F90 (waits,
#             tests, windows, graphs through `use mpi`) give the same results traced as plain,
#             and their flight recorders hold every call, each one done
#   aside     a non-MPI process with the layer preloaded; GPURUN_TRACE=none; a program that links
#             libgpurun (examples/sim); a statically linked program (a notice); a missing layer
#   tool      another PMPI tool preloaded after the layer still sees every call
# usage: test_mpitrace.sh MPI_LAUNCH GPURUN GPURUN_TOP MPI_CASES SIM MPICC MPIF90 LIB
set -u
launch=$1 gpurun=$2 top=$3 cases=$4 sim=$5 mpicc=$6 mpif90=$7 lib=$8
tmp=$(mktemp -d /tmp/gr_mpitrace.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fail=0
bad() {
  echo "FAIL: $*" >&2
  fail=1
}
ok() { echo "ok: $*"; }
export GPURUN_MONITOR_DIR="$tmp/mon"

# ---- results ------------------------------------------------------------------------------------
"$launch" -np 3 --oversubscribe "$cases" exact > "$tmp/plain.out" 2>&1 || bad "plain exact run: $(cat "$tmp/plain.out")"
GPURUN_JOB_ID=exact "$launch" -np 3 --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID \
  "$gpurun" --trace=mpi "$cases" exact > "$tmp/traced.out" 2> "$tmp/traced.err" ||
  bad "traced exact run: $(cat "$tmp/traced.out" "$tmp/traced.err")"
if grep -q "0 failed" "$tmp/traced.out" && cmp -s "$tmp/plain.out" "$tmp/traced.out"; then
  ok "exact: the same output traced as plain ($(cat "$tmp/plain.out"))"
else
  bad "exact: plain [$(cat "$tmp/plain.out")] traced [$(cat "$tmp/traced.out")]"
fi
# the communicators it made, by the layer's ids: world, a split, its dup by name, a cartesian one
for r in 0 1 2; do
  f="$tmp/mon/exact/mpistats.$r.json"
  for want in '"id": "w"' '"name": "halves"' '"id": "w.2:0"'; do
    grep -q "$want" "$f" 2>/dev/null || bad "exact: $f lacks $want: $(head -c 400 "$f" 2>&1)"
  done
done
GPURUN_JOB_ID=threads "$launch" -np 2 --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID \
  "$gpurun" --trace=mpi "$cases" threads > "$tmp/thr.out" 2>&1
if grep -q "threads: 0 failed" "$tmp/thr.out"; then ok "MPI_THREAD_MULTIPLE: 4 threads, 0 failed"
elif grep -q "not provided" "$tmp/thr.out"; then ok "MPI_THREAD_MULTIPLE not provided by this MPI"
else bad "threads: $(cat "$tmp/thr.out")"; fi

# The records of a flight dump, one a line: communicator id, name, op, count, state.
records() {
  awk '/^ \{"id": / {
         match($0, /"id": "[^"]*"/); id = substr($0, RSTART + 7, RLENGTH - 8)
         match($0, /"name": "[^"]*"/); name = substr($0, RSTART + 9, RLENGTH - 10) }
       /^  \{"seq": / {
         match($0, /"op": "[^"]*"/); op = substr($0, RSTART + 7, RLENGTH - 8)
         match($0, /"count": [0-9]*/); n = substr($0, RSTART + 9, RLENGTH - 9)
         match($0, /"state": "[a-z]*"/); st = substr($0, RSTART + 10, RLENGTH - 11)
         print id, name, op, n, st }' "$1" 2> /dev/null
}
# Whether a records listing holds a done record of op (MPI_ left out) on the communicator whose
# field (1 id, 2 name) is comm, with count n when n is given.
has_rec() {
  awk -v f="$2" -v c="$3" -v op="MPI_$4" -v n="${5:-}" \
    '$f == c && $3 == op && (n == "" || $4 == n) && $5 == "done" { ok = 1 } END { exit !ok }' "$1"
}

family=$("$launch" --family 2>/dev/null)

# ---- idup: MPI_Comm_idup's communicators, named as the n-th creation over their parent --------------
# two idups pending at once on the world (completed in opposite orders on even and odd ranks), a
# blocking dup, then an idup of the second (MPI_Comm_idup_with_info where MPI is 4.0) completed by
# MPI_Test: w.1:0, w.2:0, w.3:0 and w.2:0.1:0 on every rank (a communicator the layer did not see
# made would be u<rank>.<n>, different on each)
"$launch" -np 3 --oversubscribe "$cases" idup > "$tmp/idplain.out" 2>&1 || bad "plain idup run: $(cat "$tmp/idplain.out")"
GPURUN_JOB_ID=idup GPURUN_LOG=debug "$launch" -np 3 --oversubscribe -x GPURUN_MONITOR_DIR \
  -x GPURUN_JOB_ID -x GPURUN_LOG "$gpurun" --trace=mpi "$cases" idup > "$tmp/id.out" 2> "$tmp/id.err" ||
  bad "traced idup run: $(cat "$tmp/id.out" "$tmp/id.err")"
if grep -q "idup: [0-9]* checks, 0 failed" "$tmp/id.out" && cmp -s "$tmp/idplain.out" "$tmp/id.out"; then
  ok "idup: the same output traced as plain ($(cat "$tmp/id.out"))"
else
  bad "idup: plain [$(cat "$tmp/idplain.out")] traced [$(cat "$tmp/id.out")]"
fi
inner=Comm_idup
[ "$family" = mpich ] && inner=Comm_idup_with_info
before=$fail fail=0
for r in 0 1 2; do
  records "$tmp/mon/idup/flight.$r.json" > "$tmp/id.rec.$r"
  missing=
  [ "$(awk '$1 == "w" && $3 == "MPI_Comm_idup" && $5 == "done"' "$tmp/id.rec.$r" | wc -l)" = 2 ] ||
    missing="$missing w:Comm_idup(x2)"
  for want in w.2:0:$inner w.1:0:Allreduce w.2:0:Allreduce w.3:0:Allreduce w.2:0.1:0:Allreduce \
              w.2:0.1:0:Sendrecv; do
    has_rec "$tmp/id.rec.$r" 1 "${want%:*}" "${want##*:}" || missing="$missing $want"
  done
  [ -z "$missing" ] || bad "idup: rank $r's flight recorder lacks$missing: $(cat "$tmp/id.rec.$r")"
  running=$(awk '$5 != "done"' "$tmp/id.rec.$r")
  [ -z "$running" ] || bad "idup: rank $r's records not done: $running"
done
[ $fail = 0 ] && ok "idup: every rank names the idup'ed communicators w.1:0, w.2:0 and w.2:0.1:0 (MPI_$inner), their calls recorded, all done"
[ $before = 0 ] || fail=1

# ---- bigcount: MPI 4.0's MPI_*_c calls ----------------------------------------------------------
# (the mode calls no plain form of them: every record below is one of the _c wrappers')
"$launch" -np 3 --oversubscribe "$cases" bigcount > "$tmp/bcplain.out" 2>&1 || bad "plain bigcount run: $(cat "$tmp/bcplain.out")"
if grep -q "has no big-count functions" "$tmp/bcplain.out"; then
  echo "skip: $(cat "$tmp/bcplain.out")"
else
  GPURUN_JOB_ID=bigcount GPURUN_LOG=debug "$launch" -np 3 --oversubscribe -x GPURUN_MONITOR_DIR \
    -x GPURUN_JOB_ID -x GPURUN_LOG "$gpurun" --trace=mpi "$cases" bigcount > "$tmp/bc.out" 2> "$tmp/bc.err" ||
    bad "traced bigcount run: $(cat "$tmp/bc.out" "$tmp/bc.err")"
  if grep -q "bigcount: [0-9]* checks, 0 failed" "$tmp/bc.out" && cmp -s "$tmp/bcplain.out" "$tmp/bc.out"; then
    ok "bigcount: the same output traced as plain ($(cat "$tmp/bc.out"))"
  else
    bad "bigcount: plain [$(cat "$tmp/bcplain.out")] traced [$(cat "$tmp/bc.out")]"
  fi
  before=$fail fail=0
  # op:count; the v and w forms of all-to-all and reduce_scatter record count 0, as wrap.c does
  colls="Allreduce:3 Bcast:3 Reduce:3 Allgather:3 Allgatherv:3 Gather:3 Gatherv:3 Scatter:3
         Scatterv:3 Alltoall:3 Alltoallv:0 Alltoallw:0 Scan:3 Exscan:3 Reduce_scatter:0
         Reduce_scatter_block:3"
  icolls="Iallreduce:3 Ibcast:3 Ireduce:3 Iallgather:3 Iallgatherv:3 Igather:3 Igatherv:3
          Iscatter:3 Iscatterv:3 Ialltoall:3 Ialltoallv:0 Ialltoallw:0 Iscan:3 Iexscan:3
          Ireduce_scatter:0 Ireduce_scatter_block:3"
  for r in 0 1 2; do
    records "$tmp/mon/bigcount/flight.$r.json" > "$tmp/bc.rec.$r"
    missing=
    for want in $colls; do
      has_rec "$tmp/bc.rec.$r" 2 bc_coll "${want%:*}" "${want#*:}" || missing="$missing bc_coll:$want"
    done
    for want in $icolls; do
      has_rec "$tmp/bc.rec.$r" 2 bc_icoll "${want%:*}" "${want#*:}" || missing="$missing bc_icoll:$want"
    done
    # (MPI_Mrecv_c is recorded without a communicator, as MPI_Mrecv: no flight recorder holds it)
    p2p="Sendrecv Sendrecv_replace Irecv Isend Issend Ibsend Irsend"
    [ $r = 0 ] && p2p="$p2p Send Ssend Bsend Rsend"
    [ $r = 2 ] && p2p="$p2p Recv"
    for op in $p2p; do
      has_rec "$tmp/bc.rec.$r" 2 bc_p2p "$op" 3 || missing="$missing bc_p2p:$op:3"
    done
    [ -z "$missing" ] || bad "bigcount: rank $r's flight recorder lacks$missing: $(cat "$tmp/bc.rec.$r")"
    running=$(awk '$5 != "done"' "$tmp/bc.rec.$r")
    [ -z "$running" ] || bad "bigcount: rank $r's records not done: $running"
  done
  [ $fail = 0 ] && ok "bigcount: each rank's flight recorder holds every MPI_*_c call with its count, all done"
  [ $before = 0 ] || fail=1
fi

# ---- names: a receive nobody sends to -------------------------------------------------------------
mkdir -p "$tmp/loop"
GPURUN_JOB_ID=loop timeout -k 5 60 "$launch" -np 3 --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID \
  "$gpurun" --monitor=0.2 "$cases" loop "$tmp/loop" > "$tmp/loop.out" 2>&1 &
job=$!
i=0
while [ $i -lt 200 ] && ! awk '$1 == "comm" && $12 > 20 { ok = 1 } END { exit !ok }' "$tmp/mon/loop/live.2" 2>/dev/null; do
  i=$((i + 1)); sleep 0.1
done
touch "$tmp/loop/recv.1"
sleep 3
"$top" --once --hang 1 "$tmp/mon/loop" > "$tmp/top.out" 2>&1
verdict=$(sed -n '2,/^ RANK/p' "$tmp/top.out" | grep -v '^ RANK' | tr '\n' ' ')
case $verdict in
  "WAITING FOR rank 1:"*MPI_Allreduce*MPI_Recv*) ok "gpurun-top: $verdict" ;;
  *) bad "gpurun-top did not name rank 1 in MPI_Recv: $(cat "$tmp/top.out")" ;;
esac
rm -f "$tmp/loop/recv.1"
kill "$job" 2>/dev/null
wait "$job" 2>/dev/null

# ---- timeout: report, then abort ----------------------------------------------------------------
GPURUN_JOB_ID=late "$launch" -np 3 --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID \
  "$gpurun" --trace=mpi --timeout 1 "$cases" late 2 6 > "$tmp/late.out" 2>&1
rc=$?
line=$(grep "hang:" "$tmp/late.out")
case $line in
  *"hang: ranks 0,1 waited"*"in MPI_Allreduce #2 on world; missing: rank 2 outside MPI (last call MPI_Allreduce #1"*)
    ok "verdict: $line" ;;
  *) bad "timeout verdict: $(cat "$tmp/late.out")" ;;
esac
[ $rc = 0 ] && grep -q "late: done" "$tmp/late.out" || bad "report mode ended the job (rc $rc)"
for r in 0 1 2; do
  [ -f "$tmp/mon/late/flight.$r.json" ] || bad "no flight.$r.json after the timeout"
done
grep -q '"reason": "hang"' "$tmp/mon/late/flight.2.json" 2>/dev/null ||
  bad "the late rank's flight recorder was not dumped on the mark: $(head -c 200 "$tmp/mon/late/flight.2.json" 2>&1)"
start=$(date +%s)
GPURUN_JOB_ID=abort "$launch" -np 3 --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID \
  "$gpurun" --trace=mpi --timeout 1 --on-hang abort "$cases" late 2 60 > "$tmp/abort.out" 2>&1
rc=$? secs=$(( $(date +%s) - start ))
if [ $rc != 0 ] && grep -q "ending the job (exit 125)" "$tmp/abort.out" && [ $secs -lt 30 ]; then
  ok "--on-hang abort: rc $rc after $secs s"
else
  bad "--on-hang abort: rc $rc after $secs s: $(cat "$tmp/abort.out")"
fi

# ---- fortran ----------------------------------------------------------------------------------
# (MPICH's mpi_f08 calls PMPI_Init, PMPI_Barrier, PMPI_Comm_split ... past the C functions: the
# layer wraps its entry points, mpitrace/fortran_mpich_f08.c)
for flavour in mpi mpi_f08; do
  src=$tmp/f_$flavour.f90
  if [ $flavour = mpi ]; then
    decl="integer :: sub"
  else
    decl="type(MPI_Comm) :: sub"
  fi
  cat > "$src" <<EOF
program late
  use $flavour
  implicit none
  integer :: ierr, rank, i
  $decl
  double precision :: x, y
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_split(MPI_COMM_WORLD, 0, rank, sub, ierr)
  x = rank
  do i = 1, 10
    call MPI_Allreduce(x, y, 1, MPI_DOUBLE_PRECISION, MPI_SUM, sub, ierr)
  end do
  if (rank == 1) call sleep(5)
  call MPI_Barrier(sub, ierr)
  if (rank == 0) print '(a,f5.1)', 'fortran y ', y
  call MPI_Comm_free(sub, ierr)
  call MPI_Finalize(ierr)
end program
EOF
  if ! "$mpif90" -o "$tmp/f_$flavour" "$src" > "$tmp/fc.out" 2>&1; then
    bad "fortran: $mpif90 $flavour: $(cat "$tmp/fc.out")"
    continue
  fi
  GPURUN_JOB_ID=f_$flavour "$launch" -np 3 --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID \
    "$gpurun" --trace=mpi --timeout 1 "$tmp/f_$flavour" > "$tmp/f.out" 2>&1
  line=$(grep "hang:" "$tmp/f.out")
  case $line in
    *"hang: ranks 0,2 waited"*"in MPI_Barrier #11 on w.1:0; missing: rank 1 outside MPI (last call MPI_Allreduce #10"*)
      grep -q "fortran y   3.0" "$tmp/f.out" && ok "fortran ($flavour): $line" || bad "fortran ($flavour) result: $(cat "$tmp/f.out")" ;;
    *) bad "fortran ($flavour) verdict: $(cat "$tmp/f.out")" ;;
  esac
done

# every kind of call through mpi_f08: the same output traced as plain; the flight recorders,
# dumped at exit (GPURUN_LOG=debug), hold each call and none is left running (a request a wait or
# test wrapper missed: Open MPI's mpi_f08 reaches fortran.c, MPICH's fortran_mpich_f08.c)
f08src=$(dirname "$0")/f08_cases.F90
large=
[ "$family" = mpich ] && large=-DGR_LARGE_COUNT # MPI 4's large counts: MPICH 4, not Open MPI 4.1
if ! "$mpif90" $large -o "$tmp/f08_cases" "$f08src" > "$tmp/fc.out" 2>&1; then
  bad "f08 cases: $mpif90: $(cat "$tmp/fc.out")"
else
  "$launch" -np 3 --oversubscribe "$tmp/f08_cases" > "$tmp/f08plain.out" 2>&1 ||
    bad "f08 cases plain: $(cat "$tmp/f08plain.out")"
  GPURUN_JOB_ID=f08 GPURUN_LOG=debug "$launch" -np 3 --oversubscribe -x GPURUN_MONITOR_DIR \
    -x GPURUN_JOB_ID -x GPURUN_LOG "$gpurun" --trace=mpi "$tmp/f08_cases" > "$tmp/f08.out" \
    2> "$tmp/f08.err" || bad "f08 cases traced: $(cat "$tmp/f08.out" "$tmp/f08.err")"
  if grep -q "f08: [0-9]* checks on each rank, 0 failed" "$tmp/f08.out" &&
     cmp -s "$tmp/f08plain.out" "$tmp/f08.out"; then
    ok "f08 cases: the same output traced as plain ($(cat "$tmp/f08.out"))"
  else
    bad "f08 cases: plain [$(cat "$tmp/f08plain.out")] traced [$(cat "$tmp/f08.out")]"
  fi
  before=$fail fail=0
  for r in 0 1 2; do
    f=$tmp/mon/f08/flight.$r.json
    want="Barrier Bcast Reduce Allreduce Gather Gatherv Scatter Scatterv Allgather Allgatherv
          Alltoall Alltoallv Alltoallw Reduce_scatter Reduce_scatter_block Scan Exscan Ibarrier
          Iallreduce Ibcast Iallgather Sendrecv Sendrecv_replace Isend Issend Irecv Wait Waitall
          Waitany Waitsome Comm_dup Comm_split Comm_split_type Comm_create Cart_create Cart_sub
          Win_fence Win_lock Win_unlock Finalize"
    [ $r = 0 ] && want="$want Send Ssend"
    [ $r = 1 ] && want="$want Recv Probe Mprobe"
    missing=
    for op in $want; do
      grep -q "\"op\": \"MPI_$op\"" "$f" 2>/dev/null || missing="$missing $op"
    done
    [ -z "$missing" ] || bad "f08 cases: rank $r's flight recorder lacks$missing: $(head -c 600 "$f" 2>&1)"
    running=$(grep -o '"op": "MPI_[A-Za-z_]*"[^}]*"state": "[a-z]*"' "$f" 2>/dev/null | grep -v '"done"$')
    [ -z "$running" ] || bad "f08 cases: rank $r's records not done: $running"
    grep -q '"name": "f08dup"' "$f" 2>/dev/null || bad "f08 cases: rank $r: no communicator named f08dup"
  done
  [ $fail = 0 ] && ok "f08 cases: each rank's flight recorder holds every kind of call, all done"
  [ $before = 0 ] || fail=1
fi

# the same through `use mpi` (mpif.h's bindings: Open MPI's mpi_<name>_, MPICH's C functions) for
# the waits and tests, a window's synchronisation, graph topologies and a name
usrc=$(dirname "$0")/use_mpi_cases.F90
if ! "$mpif90" -o "$tmp/use_mpi_cases" "$usrc" > "$tmp/fc.out" 2>&1; then
  bad "use mpi cases: $mpif90: $(cat "$tmp/fc.out")"
else
  "$launch" -np 3 --oversubscribe "$tmp/use_mpi_cases" > "$tmp/umplain.out" 2>&1 ||
    bad "use mpi cases plain: $(cat "$tmp/umplain.out")"
  GPURUN_JOB_ID=usempi GPURUN_LOG=debug "$launch" -np 3 --oversubscribe -x GPURUN_MONITOR_DIR \
    -x GPURUN_JOB_ID -x GPURUN_LOG "$gpurun" --trace=mpi "$tmp/use_mpi_cases" > "$tmp/um.out" \
    2> "$tmp/um.err" || bad "use mpi cases traced: $(cat "$tmp/um.out" "$tmp/um.err")"
  if grep -q "^use mpi: 0 failed" "$tmp/um.out" && cmp -s "$tmp/umplain.out" "$tmp/um.out"; then
    ok "use mpi cases: the same output traced as plain ($(cat "$tmp/um.out"))"
  else
    bad "use mpi cases: plain [$(cat "$tmp/umplain.out")] traced [$(cat "$tmp/um.out")]"
  fi
  before=$fail fail=0
  for r in 0 1 2; do
    f=$tmp/mon/usempi/flight.$r.json
    missing=
    for op in Irecv Isend Waitany Waitsome Win_lock_all Win_flush Win_flush_all Win_unlock_all \
              Win_post Win_start Win_complete Win_wait Graph_create Dist_graph_create \
              Dist_graph_create_adjacent Comm_split_type Comm_dup Finalize; do
      grep -q "\"op\": \"MPI_$op\"" "$f" 2>/dev/null || missing="$missing $op"
    done
    [ -z "$missing" ] || bad "use mpi cases: rank $r's flight recorder lacks$missing: $(head -c 600 "$f" 2>&1)"
    running=$(grep -o '"op": "MPI_[A-Za-z_]*"[^}]*"state": "[a-z]*"' "$f" 2>/dev/null | grep -v '"done"$')
    [ -z "$running" ] || bad "use mpi cases: rank $r's records not done: $running"
    grep -q '"name": "usempi"' "$f" 2>/dev/null || bad "use mpi cases: rank $r: no communicator named usempi"
  done
  [ $fail = 0 ] && ok "use mpi cases: each rank's flight recorder holds every kind of call, all done"
  [ $before = 0 ] || fail=1
fi

# ---- python: mpi4py loads MPI with its module, RTLD_LOCAL, after the layer started ----------------
if [ "$family" != openmpi ]; then
  # Debian's mpi4py is linked with Open MPI: a layer built for MPICH would pass Open MPI's 64-bit
  # handles through its own 32-bit ones (docs/architecture.md, "The MPI layer")
  echo "skip: mpi4py is Open MPI's here, the layer $family's"
elif /usr/bin/python3 -c 'import mpi4py' 2> /dev/null; then
  GPURUN_JOB_ID=py "$launch" -np 2 --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID \
    "$gpurun" --trace=mpi /usr/bin/python3 -c \
    'import sys; from mpi4py import MPI; c = MPI.COMM_WORLD; sys.stdout.write("mpi4py sum %d\n" % c.allreduce(c.rank + 1)); sys.stdout.flush()' \
    > "$tmp/py.out" 2>&1
  if [ "$(grep -c 'mpi4py sum 3' "$tmp/py.out")" = 2 ] &&
     { [ "$family" != openmpi ] || grep -q '"calls": [1-9]' "$tmp/mon/py/mpistats.0.json"; }; then
    ok "mpi4py: the same sums, and (Open MPI) the layer's statistics"
  else
    bad "mpi4py: $(cat "$tmp/py.out" "$tmp/mon/py/mpistats.0.json" 2>&1)"
  fi
else
  echo "skip: no mpi4py for /usr/bin/python3"
fi

# ---- aside --------------------------------------------------------------------------------------
LD_PRELOAD=$lib /bin/sh -c 'echo preloaded' > "$tmp/sh.out" 2>&1
[ "$(cat "$tmp/sh.out")" = preloaded ] && ok "a shell with the layer preloaded" || bad "shell: $(cat "$tmp/sh.out")"
GPURUN_JOB_ID=none GPURUN_TRACE=none "$launch" -np 2 --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID \
  -x GPURUN_TRACE "$gpurun" --monitor=0.2 "$cases" exact > "$tmp/none.out" 2>&1
if grep -q "0 failed" "$tmp/none.out" && ! ls "$tmp/mon/none/live."* > /dev/null 2>&1; then
  ok "GPURUN_TRACE=none: no live state"
else
  bad "GPURUN_TRACE=none: $(cat "$tmp/none.out"; ls "$tmp/mon/none")"
fi
GPURUN_JOB_ID=sim GPURUN_LOG=info "$launch" -np 2 --oversubscribe -x GPURUN_MONITOR_DIR -x GPURUN_JOB_ID \
  -x GPURUN_LOG "$gpurun" --monitor=0.2 "$sim" --steps 20 --quiet > "$tmp/sim.out" 2>&1
if grep -q "the MPI layer stands aside: the program links libgpurun" "$tmp/sim.out" &&
   [ -f "$tmp/mon/sim/live.0" ] && ! grep -q "MPI_\|^comm w " "$tmp/mon/sim/live.0"; then
  ok "a libgpurun program: the layer stands aside, its own calls are the live state"
else
  bad "libgpurun program: $(cat "$tmp/sim.out" "$tmp/mon/sim/live.0" 2>&1)"
fi
printf '#include <stdio.h>\nint main(void) { puts("static ran"); return 0; }\n' > "$tmp/st.c"
if cc -static -o "$tmp/st" "$tmp/st.c" 2> /dev/null; then
  "$gpurun" --trace=mpi "$tmp/st" > "$tmp/st.out" 2>&1
  grep -q "is statically linked" "$tmp/st.out" && grep -q "static ran" "$tmp/st.out" &&
    ok "static program: a notice, and it runs" || bad "static: $(cat "$tmp/st.out")"
else
  echo "skip: no static libc to link a static program"
fi
GPURUN_TRACE_LIB=$tmp/nowhere.so "$gpurun" --trace=mpi /bin/true > "$tmp/miss.out" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "the MPI layer libgpurun-mpi.so was found neither" "$tmp/miss.out" &&
  ok "missing layer: exit 2 with a sentence" || bad "missing layer: rc $rc $(cat "$tmp/miss.out")"

# ---- tool: a PMPI tool loaded after the layer ----------------------------------------------------
cat > "$tmp/tool.c" <<'EOF'
#include <mpi.h>
#include <stdio.h>
static int n;
int MPI_Allreduce(const void *s, void *r, int c, MPI_Datatype t, MPI_Op o, MPI_Comm m) {
  n++;
  return PMPI_Allreduce(s, r, c, t, o, m);
}
int MPI_Finalize(void) {
  int rank;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) printf("tool: %d allreduces\n", n);
  return PMPI_Finalize();
}
EOF
if "$mpicc" -shared -fPIC -o "$tmp/tool.so" "$tmp/tool.c" > "$tmp/tc.out" 2>&1; then
  GPURUN_JOB_ID=tool LD_PRELOAD=$tmp/tool.so "$launch" -np 2 --oversubscribe -x GPURUN_MONITOR_DIR \
    -x GPURUN_JOB_ID -x LD_PRELOAD "$gpurun" --trace=mpi "$cases" late 1 0 > "$tmp/tool.out" 2>&1
  if grep -q "tool: 2 allreduces" "$tmp/tool.out" &&
     grep -q '"calls": [1-9]' "$tmp/mon/tool/mpistats.0.json" 2>/dev/null; then
    ok "another PMPI tool after the layer: both see the calls ($(grep tool: "$tmp/tool.out"))"
  else
    bad "tool: $(cat "$tmp/tool.out" "$tmp/mon/tool/mpistats.0.json" 2>&1)"
  fi
else
  bad "tool: cannot build: $(cat "$tmp/tc.out")"
fi
exit $fail
