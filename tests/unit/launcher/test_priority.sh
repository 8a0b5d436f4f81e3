#!/bin/sh
# gpurun --priority end to end: the program reads its own niceness (/proc/PID/stat field 19) and
# GPURUN_PRIORITY. The expected niceness is computed here from this shell's own, independently of
# gpurun: low = nice 10 or nicer, high = nice -5 or less nice, normal unchanged; a gpurun under
# another does not add it twice. High as root succeeds; as user nobody it is refused: one warning
# line, and the program still runs.
# usage: test_priority.sh GPURUN
# exit 77 (skipped) when a part could not run: high as root (not root) or as user nobody (su missing,
# or nobody cannot reach GPURUN); every other part has run and passed by then.
set -u
gpurun=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/gr_priority.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
# field 19 of /proc/PID/stat: after "PID (comm) " (comm may hold spaces) it is the 17th
nice_of() { sed 's/.*) //' "/proc/$1/stat" | cut -d' ' -f17; }
base=$(nice_of $$)
low=$base; [ "$low" -lt 10 ] && low=10
high=$base; [ "$high" -gt -5 ] && high=-5
probe='echo "$(sed "s/.*) //" /proc/$$/stat | cut -d" " -f17) ${GPURUN_PRIORITY-unset}"; exit 7'
unset GPURUN_PRIORITY GPURUN_CONFIG

# run EXPECTED_OUTPUT ARGS...: gpurun ARGS sh -c PROBE must print EXPECTED_OUTPUT, exit 7
run() {
  want=$1
  shift
  out=$("$@" sh -c "$probe" 2> "$tmp/err")
  rc=$?
  cat "$tmp/err" >&2
  [ $rc -eq 7 ] || fail "$*: exit $rc, expected the program's 7"
  [ "$out" = "$want" ] || fail "$*: program saw '$out', expected '$want'"
}

run "$base normal" "$gpurun"
[ -s "$tmp/err" ] && fail "normal: unexpected stderr"
run "$low low" "$gpurun" --priority low
[ -s "$tmp/err" ] && fail "low: unexpected stderr"
run "$low low" env GPURUN_PRIORITY=low "$gpurun"
printf 'priority = low\n' > "$tmp/conf"
run "$low low" "$gpurun" --config "$tmp/conf"
# the supervisor's path (--monitor) hands the niceness on too
run "$low low" env GPURUN_MONITOR_DIR="$tmp/mon" "$gpurun" --monitor=0.2 --priority low
# gpurun under gpurun (GPURUN_PRIORITY inherited): the same niceness, not 10 more
run "$low low" "$gpurun" --priority low "$gpurun"
# a bad level is a usage error naming its source
GPURUN_PRIORITY=urgent "$gpurun" true 2> "$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "GPURUN_PRIORITY: expected low, normal or high, got 'urgent'" "$tmp/err" ||
  fail "GPURUN_PRIORITY=urgent: exit $rc, $(cat "$tmp/err")"

if [ "$(id -u)" != 0 ]; then
  echo "not root: high must be refused with a warning"
  run "$base high" "$gpurun" --priority high
  [ "$(grep -c 'warning: rank 0: --priority high: setpriority(nice .*) refused' "$tmp/err")" = 1 ] ||
    fail "high as a user: no single warning line"
  echo "SKIP part: high as root and as user nobody need root (the rest passed)"
  exit 77
fi
run "$high high" "$gpurun" --priority high
[ -s "$tmp/err" ] && fail "high as root: unexpected stderr"

# user nobody: refused, one warning line, the job still runs at nobody's niceness. A build tree
# under a private home (/root is 0700) is out of nobody's reach: then a copy of gpurun in the
# scratch directory (it links no library of the build tree) runs instead.
if ! su nobody -s /bin/sh -c "test -x '$gpurun'" 2> /dev/null; then
  cp "$gpurun" "$tmp/gpurun" && chmod 755 "$tmp/gpurun" && gpurun=$tmp/gpurun
fi
if ! su nobody -s /bin/sh -c "test -x '$gpurun'" 2> /dev/null; then
  echo "SKIP part: user nobody cannot run $gpurun (su missing, or /tmp not reachable; the rest passed)"
  exit 77
fi
cat > "$tmp/as_nobody.sh" <<EOS
echo "base \$(sed 's/.*) //' /proc/\$\$/stat | cut -d' ' -f17)"
'$gpurun' --priority high sh -c '$probe'
echo "rc \$?"
EOS
chmod 644 "$tmp/as_nobody.sh"
su nobody -s /bin/sh -c "sh '$tmp/as_nobody.sh'" > "$tmp/out" 2> "$tmp/err"
cat "$tmp/out" "$tmp/err"
nb=$(sed -n 's/^base //p' "$tmp/out")
grep -qx "$nb high" "$tmp/out" || fail "nobody: program did not run at its old niceness $nb"
grep -qx "rc 7" "$tmp/out" || fail "nobody: the program's status 7 did not come back"
[ "$(wc -l < "$tmp/err")" = 1 ] &&
  grep -q '^gpurun: warning: rank 0: --priority high: setpriority(nice .*) refused: Permission denied' "$tmp/err" ||
  fail "nobody: expected exactly one warning line"
echo PASS
