#!/bin/sh
# A supervisor killed with SIGKILL cannot remove its .prom file (the supervisor is the process its
# owner line names, beside the program, which keeps gpurun's pid and runs on): the next gpurun job
# on the directory does, at its first sample, so the real node exporter stops serving the dead job; and a
# job already running there does at its next sample. What
# the sweep must leave alone stays: a file planted by another user (nobody) and a symlink, both
# copies of the dead job's text. gpurun_up and gpurun_sample_time_seconds are served and parse, and
# the dead job's sample time falls behind the clock while its file is still there (what the alert
# in docs/formats.md looks for).
# usage: test_prometheus_dead.sh GPURUN FAKE_NVML TOPOLOGY
set -u
gpurun=$1 fake=$2 topo=$3
exporter=$(command -v prometheus-node-exporter) || { echo "prometheus-node-exporter not installed"; exit 77; }
[ "$(id -u)" != 0 ] || id nobody > /dev/null 2>&1 || { echo "no user nobody"; exit 77; }
tmp=$(mktemp -d /tmp/gr_promdead.XXXXXX)
exp_pid= a_pid= b_pid= c_pid= d_pid=
cleanup() {
  for p in $d_pid $c_pid $b_pid $a_pid; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  [ -n "$exp_pid" ] && { kill "$exp_pid" 2>/dev/null; wait "$exp_pid" 2>/dev/null; }
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; ls -la "$tmp/prom" >&2; exit 1; }
# nobody may write into the directory (sticky, as a shared textfile directory would be)
chmod 755 "$tmp"
mkdir -m 1777 "$tmp/prom"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$exporter" --web.listen-address=127.0.0.1:$port --collector.disable-defaults --collector.textfile \
  --collector.textfile.directory="$tmp/prom" > "$tmp/exporter.log" 2>&1 &
exp_pid=$!
scrape() { curl -sf "http://127.0.0.1:$port/metrics" > "$tmp/metrics"; }
i=0
until scrape; do
  i=$((i + 1)); [ $i -lt 100 ] || fail "node exporter did not come up: $(cat "$tmp/exporter.log")"
  sleep 0.1
done
served() { grep -q "^gpurun_[a-z_]*{.*job=\"$1\"" "$tmp/metrics"; }
# The supervisor of a .prom file: the pid of its owner line (not gpurun's pid, the program's).
owner_pid() { head -1 "$1" | sed -n 's/.* pid=\([0-9]*\) .*/\1/p'; }
kill_supervisor() { # FILE GPURUN_PID
  sup=$(owner_pid "$1")
  [ -n "$sup" ] && [ "$sup" != "$2" ] || fail "the owner line of $1 names pid '$sup', not a supervisor beside $2"
  kill -9 "$sup"
}
value() { grep "^$1{.*job=\"$2\"" "$tmp/metrics" | awk '{ print $NF }' | head -1; }

# Job A on the recorded 4-GPU node with the fake NVML (its GPUs at 90%), then SIGKILL of its
# supervisor.
GPURUN_NVML_LIBRARY="$fake" GR_FAKE_NVML=node4 GPURUN_MONITOR_DIR="$tmp/monA" GPURUN_JOB_ID=jobA \
  "$gpurun" --topology "$topo" --monitor=0.2 --prometheus "$tmp/prom" sleep 100 > "$tmp/a.out" 2>&1 &
a_pid=$!
i=0
until scrape && grep -q '^gpurun_gpu_utilization_ratio{.*job="jobA".* 0.9$' "$tmp/metrics"; do
  i=$((i + 1)); [ $i -lt 300 ] || { cat "$tmp/a.out"; fail "job A's GPU series not served after 30 s"; }
  sleep 0.1
done
afile=$(ls "$tmp/prom"/gpurun_jobA_*.prom) || fail "no file of job A"
kill_supervisor "$afile" "$a_pid"
sleep 1
kill -0 "$a_pid" || fail "job A's program died with its supervisor"
[ -f "$afile" ] || fail "job A's file went away before any other job ran (nothing else removes it)"
scrape || fail "scrape after the kill"
served jobA || fail "job A's series were not served after its kill"
grep -q '^node_textfile_scrape_error 0' "$tmp/metrics" || fail "node exporter could not parse job A's file"
t=$(value gpurun_sample_time_seconds jobA)
awk -v t="$t" -v now="$(date +%s.%N)" 'BEGIN { exit !(t > 0 && now - t > 0.6) }' ||
  fail "job A's sample time '$t' does not fall behind the clock after its kill"

# What the sweep must not touch: nobody's copy (another user's file, same dead owner line) and a
# link to a copy outside the directory; their job labels differ so that the exporter serves them.
# (Only root can act as nobody here; otherwise the case is left out and said so.)
nobody_planted() { return 0; }
if [ "$(id -u)" = 0 ]; then
  sed 's/job="jobA"/job="jobN"/' "$afile" > "$tmp/nobody.src"
  su nobody -s /bin/sh -c "cat > '$tmp/prom/gpurun_jobN_x_0.prom'" < "$tmp/nobody.src" ||
    fail "su nobody could not plant its file"
  nobody_planted() { served jobN; }
else
  echo "not root: the case of another user's file is left out"
fi
sed 's/job="jobA"/job="jobL"/' "$afile" > "$tmp/outside.prom"
cp "$tmp/outside.prom" "$tmp/outside.orig"
ln -s "$tmp/outside.prom" "$tmp/prom/gpurun_jobL_x_0.prom"
scrape && nobody_planted && served jobL || fail "the planted files are not served"

# Job B on the same directory (this machine's cores): once its first sample is served, job A's
# series are not.
GPURUN_MONITOR_DIR="$tmp/monB" GPURUN_JOB_ID=jobB \
  "$gpurun" --monitor=0.2 --prometheus "$tmp/prom" sleep 3 > "$tmp/b.out" 2>&1 &
b_pid=$!
i=0
until scrape && grep -q '^gpurun_sample_time_seconds{.*job="jobB"' "$tmp/metrics"; do
  i=$((i + 1)); [ $i -lt 300 ] || { cat "$tmp/b.out"; fail "job B's series not served after 30 s"; }
  sleep 0.1
done
grep '^gpurun_up\|^gpurun_sample_time\|^node_textfile_scrape_error' "$tmp/metrics"
served jobA && fail "job A (killed) is still served after job B's first sample"
[ -e "$afile" ] && fail "job A's file is still there after job B's first sample"
grep -q '^node_textfile_scrape_error 0' "$tmp/metrics" || fail "node exporter could not parse the files"
[ "$(value gpurun_up jobB)" = 1 ] || fail "gpurun_up of job B is not 1"
grep -q '^# TYPE gpurun_up gauge' "$tmp/metrics" || fail "gpurun_up is not a gauge"
t=$(value gpurun_sample_time_seconds jobB)
awk -v t="$t" -v now="$(date +%s.%N)" 'BEGIN { exit !(t > now - 30 && t <= now + 1) }' ||
  fail "job B's sample time '$t' is not now"
nobody_planted || fail "nobody's file was removed"
if [ "$(id -u)" = 0 ]; then
  [ "$(stat -c %U "$tmp/prom/gpurun_jobN_x_0.prom")" = nobody ] || fail "nobody's file changed hands"
fi
[ -L "$tmp/prom/gpurun_jobL_x_0.prom" ] || fail "the symlink was removed"
cmp -s "$tmp/outside.prom" "$tmp/outside.orig" || fail "the symlink's target was changed"
served jobL || fail "the symlink is no longer served"
wait "$b_pid"
rc=$?
b_pid=
[ $rc -eq 0 ] || { cat "$tmp/b.out"; fail "job B exited $rc"; }
# the supervisor removes it just after the program's end, which gpurun's caller sees first
i=0
while set -- "$tmp"/prom/gpurun_jobB_*.prom; [ -e "$1" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -e "$1" ] && fail "job B's file outlived it by 5 s"

# Job C samples on while job D is killed: C's next sample removes D's file.
GPURUN_MONITOR_DIR="$tmp/monC" GPURUN_JOB_ID=jobC \
  "$gpurun" --monitor=0.2 --prometheus "$tmp/prom" sleep 100 > "$tmp/c.out" 2>&1 &
c_pid=$!
GPURUN_MONITOR_DIR="$tmp/monD" GPURUN_JOB_ID=jobD \
  "$gpurun" --monitor=0.2 --prometheus "$tmp/prom" sleep 100 > "$tmp/d.out" 2>&1 &
d_pid=$!
i=0
until scrape && served jobC && served jobD; do
  i=$((i + 1)); [ $i -lt 300 ] || { cat "$tmp/c.out" "$tmp/d.out"; fail "jobs C and D not served after 30 s"; }
  sleep 0.1
done
kill_supervisor "$(ls "$tmp/prom"/gpurun_jobD_*.prom)" "$d_pid"
killed=$(date +%s.%N)
i=0
until scrape && awk -v t="$(value gpurun_sample_time_seconds jobC)" -v k="$killed" 'BEGIN { exit !(t > k) }'; do
  i=$((i + 1)); [ $i -lt 300 ] || { cat "$tmp/c.out"; fail "no sample of job C after job D's kill in 30 s"; }
  sleep 0.1
done
served jobD && fail "job D (killed) is still served after the next sample of job C, which was running"
nobody_planted && served jobL || fail "the planted files went away"
grep -q '^node_textfile_scrape_error 0' "$tmp/metrics" || fail "node exporter could not parse the files"
echo PASS
