#!/bin/sh
# Monitor files in shared directories, end to end through the real gpurun and gpurun-report, as two users (root and nobody):
# planted symlinks and foreign or world-writable job directories are refused, '..' as a job id is
# refused, job directories are 0700 (0750 with GPURUN_MONITOR_GROUP=1), CSV rows stay whole under
# a file-size limit, the time limit reaches the program's children, the program runs on unharmed
# when its supervisor is killed with SIGKILL (it used to die with it: the supervisor was its
# parent), exit codes and messages match with and without the supervisor,
# the 50 ms interval floor, and a report to a full stdout fails. Every case failed before.
# usage: test_monitor_hardening.sh GPURUN GPURUN_REPORT
# exit 77 (skipped) when the two-user cases (A, C, N) could not run: not root, or user nobody cannot
# reach GPURUN; every other case has run and passed by then.
set -u
gpurun=$1 report=$2
T=$(mktemp -d /tmp/gr_hardening.XXXXXX)
chmod 755 "$T"
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
host=$(hostname | tr -c 'A-Za-z0-9._+@\n-' '_')
export GPURUN_NVML_LIBRARY=/nonexistent/libnvidia-ml.so.1
unset GPURUN_MONITOR GPURUN_TIME_LIMIT GPURUN_JOB_ID SLURM_JOB_ID OMPI_MCA_ess_base_jobid PMIX_NAMESPACE
as_nobody() { su nobody -s /bin/sh -c "$*"; }
# A build tree under a private home (/root is 0700) is out of nobody's reach: a copy of gpurun in
# the scratch directory (it links no library of the build tree) lets the two-user cases run anyway.
if [ "$(id -u)" = 0 ] && ! as_nobody "test -x '$gpurun'" 2>/dev/null; then
  cp "$gpurun" "$T/gpurun" && chmod 755 "$T/gpurun" && gpurun=$T/gpurun
fi
two_users=0
if [ "$(id -u)" = 0 ] && as_nobody "test -x '$gpurun'" 2>/dev/null; then two_users=1; fi

mon=$T/mon
mkdir -m 1777 "$mon" # a shared monitor root, like /scratch/gpurun-monitor
printf 'precious\n' > "$T/victim"
chmod 666 "$T/victim" # writable by both users: only the rules protect it

# --- A: a job directory another user created first, with a planted symlink -----------------------
if [ $two_users = 1 ]; then
  as_nobody "mkdir '$mon/jobA' && ln -s '$T/victim' '$mon/jobA/$host.0.csv'"
  GPURUN_MONITOR_DIR=$mon GPURUN_JOB_ID=jobA "$gpurun" --monitor=0.05 sh -c 'sleep 0.3' 2> "$T/a.err"
  rc=$?
  cat "$T/a.err"
  [ $rc = 0 ] || fail "A: the program should still run (exit $rc)"
  grep -q "owned by uid 65534" "$T/a.err" || fail "A: no one-line reason naming the owner"
  [ "$(cat "$T/victim")" = precious ] || fail "A: samples were written through nobody's symlink"

  # ... and the other way round: nobody's gpurun in a directory root made.
  mkdir -m 755 "$mon/jobC"
  ln -s "$T/victim" "$mon/jobC/$host.0.csv"
  as_nobody "GPURUN_NVML_LIBRARY=/x GPURUN_MONITOR_DIR='$mon' GPURUN_JOB_ID=jobC '$gpurun' --monitor=0.05 sh -c 'sleep 0.3'" 2> "$T/c.err"
  rc=$?
  cat "$T/c.err"
  [ $rc = 0 ] || fail "C: exit $rc"
  grep -q "owned by uid 0" "$T/c.err" || fail "C: nobody used root's job directory"
  [ "$(cat "$T/victim")" = precious ] || fail "C: samples written through root's symlink"

  # nobody's own fresh job: 0700 and nobody's.
  as_nobody "GPURUN_NVML_LIBRARY=/x GPURUN_MONITOR_DIR='$mon' GPURUN_JOB_ID=jobN '$gpurun' --monitor=0.05 sh -c 'sleep 0.2'" || fail "N: exit $?"
  [ "$(stat -c '%U %a' "$mon/jobN")" = "nobody 700" ] || fail "N: job dir is $(stat -c '%U %a' "$mon/jobN")"
  [ "$(stat -c '%U %a' "$mon/jobN/$host.0.csv")" = "nobody 600" ] || fail "N: CSV is $(stat -c '%U %a' "$mon/jobN/$host.0.csv")"
else
  echo "note: not root, or nobody cannot reach $gpurun: the two-user cases A, C and N do not run"
fi

# --- B: own directory, symlink planted at the CSV name -------------------------------------------
mkdir -m 700 "$mon/jobB"
ln -s "$T/victim" "$mon/jobB/$host.0.csv"
GPURUN_MONITOR_DIR=$mon GPURUN_JOB_ID=jobB "$gpurun" --monitor=0.05 sh -c 'sleep 0.3' 2> "$T/b.err"
cat "$T/b.err"
grep -q "symlink" "$T/b.err" || fail "B: no reason given for the symlink"
[ "$(cat "$T/victim")" = precious ] || fail "B: samples written through a symlink"

# --- D: a world-writable job directory; '..' as the job id ----------------------------------------
mkdir -m 777 "$mon/jobD"
chmod 777 "$mon/jobD"
GPURUN_MONITOR_DIR=$mon GPURUN_JOB_ID=jobD "$gpurun" --monitor=0.05 true 2> "$T/d.err"
grep -q "writable by everyone" "$T/d.err" || fail "D: a world-writable job directory was used"
[ -z "$(ls -A "$mon/jobD")" ] || fail "D: files written into a world-writable directory"
GPURUN_MONITOR_DIR=$mon GPURUN_JOB_ID=.. "$gpurun" --monitor=0.05 true 2> "$T/dd.err"
cat "$T/dd.err"
grep -q "not a safe directory name" "$T/dd.err" || fail "D: job id '..' accepted"
[ ! -e "$T/$host.0.csv" ] || fail "D: job id '..' escaped the monitor root"

# --- E: modes -------------------------------------------------------------------------------------
(umask 022; GPURUN_MONITOR_DIR=$T/m2 GPURUN_JOB_ID=e1 "$gpurun" --monitor=0.05 true) || fail "E: exit $?"
[ "$(stat -c %a "$T/m2/e1")" = 700 ] || fail "E: job dir mode $(stat -c %a "$T/m2/e1"), want 700"
(umask 022; GPURUN_MONITOR_GROUP=1 GPURUN_MONITOR_DIR=$T/m2 GPURUN_JOB_ID=e2 "$gpurun" --monitor=0.05 true) || fail "E: exit $?"
[ "$(stat -c %a "$T/m2/e2")" = 750 ] || fail "E: GPURUN_MONITOR_GROUP=1 gave mode $(stat -c %a "$T/m2/e2"), want 750"

# --- F: a file-size limit: whole rows, one warning, the program unharmed --------------------------
GPURUN_MONITOR_DIR=$T/m3 GPURUN_JOB_ID=f sh -c "ulimit -f 2; exec '$gpurun' --monitor=0.05 sh -c 'sleep 2; exit 3'" 2> "$T/f.err"
rc=$?
cat "$T/f.err"
[ $rc = 3 ] || fail "F: exit $rc, want the program's 3 (the supervisor must not die of SIGXFSZ)"
[ "$(grep -c 'sampling stops' "$T/f.err")" = 1 ] || fail "F: want exactly one warning"
csv=$T/m3/f/$host.0.csv
[ "$(tail -c 1 "$csv" | od -An -c | tr -d ' ')" = '\n' ] || fail "F: the CSV ends in half a row"
bad=$(awk -F, 'NR==1{n=NF} NF!=n{b++} END{print b+0}' "$csv")
[ "$bad" = 0 ] || fail "F: $bad rows with the wrong number of fields"
[ "$(wc -l < "$csv")" -ge 5 ] || fail "F: too few rows before the limit"

# --- G: the time limit reaches the program's children ---------------------------------------------
# (gpurun leads no process group here: the children are found below it in /proc.) The status is
# the program's own, killed by SIGTERM: 143 (it was 124 while the supervisor was the parent).
"$gpurun" --time-limit 0.5 sh -c "sleep 300 & echo \$! > '$T/bg.pid'; wait" 2> "$T/g.err"
rc=$?
cat "$T/g.err"
[ $rc = 143 ] || fail "G: exit $rc, want 143 (killed by SIGTERM)"
bg=$(cat "$T/bg.pid")
i=0
while kill -0 "$bg" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
kill -0 "$bg" 2>/dev/null && { kill "$bg"; fail "G: the program's child $bg survived the time limit"; }
grep -q "ended by the time limit of 0.5 s" "$T/g.err" || fail "G: no line saying the time limit ended it"

# --- H: a supervisor killed with SIGKILL leaves the program running --------------------------------
# (the supervisor: comm gpurun-monitor, its command line gpurun's, which names $T)
"$gpurun" --time-limit 300 sh -c "echo \$\$ > '$T/prog.pid'; while [ ! -e '$T/go' ]; do sleep 0.05; done; exit 6" &
gp=$!
i=0
while [ ! -s "$T/prog.pid" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
prog=$(cat "$T/prog.pid")
[ "$prog" = "$gp" ] || fail "H: the program's pid $prog is not gpurun's $gp"
sup=
for p in /proc/[0-9]*; do
  [ "$(cat "$p/comm" 2>/dev/null)" = gpurun-monitor ] && tr '\0' ' ' < "$p/cmdline" 2>/dev/null | grep -q "$T/prog.pid" && sup=${p#/proc/}
done
[ -n "$sup" ] || fail "H: no supervisor found"
kill -KILL "$sup"
sleep 0.3
kill -0 "$prog" 2>/dev/null || fail "H: the program $prog died with its supervisor"
touch "$T/go"
wait "$gp"
rc=$?
[ $rc = 6 ] || fail "H: the program ended with $rc, want its own 6"

# --- I: the same exit codes and message with and without the supervisor ---------------------------
printf '#!/bin/sh\n' > "$T/noexec"
chmod 644 "$T/noexec"
for p in /nonexistent/prog "$T/noexec" /etc/passwd/x; do
  "$gpurun" "$p" 2> "$T/i1.err"
  r1=$?
  "$gpurun" --time-limit 10 "$p" 2> "$T/i2.err"
  r2=$?
  [ $r1 = $r2 ] || fail "I: $p: exit $r1 without the supervisor, $r2 with it"
  cmp -s "$T/i1.err" "$T/i2.err" || { cat "$T/i1.err" "$T/i2.err"; fail "I: $p: different messages"; }
done

# --- J: the interval floor -------------------------------------------------------------------------
"$gpurun" --monitor=1e-9 true 2> "$T/j.err"
rc=$?
cat "$T/j.err"
[ $rc = 2 ] && grep -q "floor" "$T/j.err" || fail "J: --monitor=1e-9 gave exit $rc"

# --- K: a report to a full stdout is a failure -----------------------------------------------------
"$report" "$T/m2/e1" > /dev/full 2> "$T/k.err"
rc=$?
cat "$T/k.err"
[ $rc != 0 ] || fail "K: gpurun-report > /dev/full exited 0"
if [ $two_users = 0 ]; then
  echo "SKIP part: the two-user cases A, C and N (not root, or nobody cannot reach $gpurun; the rest passed)"
  exit 77
fi
echo PASS
