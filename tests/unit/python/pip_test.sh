#!/bin/sh
# pip install ./python into a fresh venv (offline, Debian's setuptools): the package imports from
# the venv, gpurun.__version__ is the project(VERSION) of CMakeLists.txt, the library is found
# through the prefix recorded at install time (GPURUN_PREFIX), through the loader path, and through
# GPURUN_LIB; a 2-rank allreduce runs under mpirun with the venv's python; a GPURUN_LIB that points
# at nothing, and a library found nowhere, fail with a message that names what was tried.
# Each case sets the environment it relies on: GPURUN_LIB, PYTHONPATH and LD_LIBRARY_PATH as the
# caller had them (an environment module's installed gpurun, say) would change where the library
# is found, so they are unset or filtered (entries that hold a libgpurun or a gpurun package
# dropped, the rest kept for MPI and numpy). With GR_PIP_POLLUTE=1 (ctest python_pip_polluted)
# the script first puts such a caller around itself: a libgpurun on LD_LIBRARY_PATH, GPURUN_LIB
# set to it, a gpurun package on PYTHONPATH.
# usage: pip_test.sh SOURCE_DIR BUILD_DIR PYTHON MPIRUN GPURUN
set -u
src=$1 build=$2 py=$3 mpirun=$4 gpurun=$5
fail() { echo "FAIL: $*" >&2; exit 1; }
tmp=$(mktemp -d /tmp/gr_pip.XXXXXX) || exit 1
trap 'rm -rf "$tmp"' EXIT
lib=$build/libgpurun.so.0
[ -e "$lib" ] || fail "$lib does not exist"
want=$(sed -n 's/^project(gpurun VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$want" ] || fail "no project(gpurun VERSION ...) in $src/CMakeLists.txt"

if [ "${GR_PIP_POLLUTE:-0}" = 1 ]; then
  # another libgpurun (a copy: a different file from every one the cases expect) and package
  mkdir -p "$tmp/other/lib" "$tmp/other/python/gpurun"
  cp "$lib" "$tmp/other/lib/libgpurun.so.0"
  echo 'raise ImportError("the gpurun package from PYTHONPATH was imported")' \
    > "$tmp/other/python/gpurun/__init__.py"
  export LD_LIBRARY_PATH="$tmp/other/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PYTHONPATH="$tmp/other/python${PYTHONPATH:+:$PYTHONPATH}"
  export GPURUN_LIB="$tmp/other/lib/libgpurun.so.0"
  echo "polluted: LD_LIBRARY_PATH=$LD_LIBRARY_PATH PYTHONPATH=$PYTHONPATH GPURUN_LIB=$GPURUN_LIB"
fi

# without_entries VAR TEST: VAR's colon-separated entries for which `TEST entry` fails
has_libgpurun() { ls "$1"/libgpurun.so* > /dev/null 2>&1; }
has_package() { [ -e "$1/gpurun/__init__.py" ] || [ -e "$1/gpurun.py" ]; }
without_entries() {
  eval "_list=\${$1:-}"
  _out= _rest=$_list
  while [ -n "$_rest" ]; do
    _e=${_rest%%:*}
    case $_rest in *:*) _rest=${_rest#*:} ;; *) _rest= ;; esac
    [ -n "$_e" ] && ! "$2" "$_e" && _out=${_out:+$_out:}$_e
  done
  echo "$_out"
}
# what every case runs under: no GPURUN_LIB, no libgpurun on the loader path, no gpurun package on
# PYTHONPATH, no user site-packages (it comes before the venv's); a case adds what it tests
ldpath=$(without_entries LD_LIBRARY_PATH has_libgpurun)
pypath=$(without_entries PYTHONPATH has_package)
unset GPURUN_LIB
if [ -n "$ldpath" ]; then export LD_LIBRARY_PATH="$ldpath"; else unset LD_LIBRARY_PATH; fi
if [ -n "$pypath" ]; then export PYTHONPATH="$pypath"; else unset PYTHONPATH; fi
export PYTHONNOUSERSITE=1
# the file of the libgpurun a python loaded: the one mapped, not the name asked for
libfile='import gpurun; print([l.split()[-1] for l in open("/proc/self/maps") if "libgpurun" in l][0])'

# A copy of the source tree's python/ beside its CMakeLists.txt: pip builds in the tree it is
# given, and its build/ and egg-info stay out of the checkout.
mkdir -p "$tmp/src" "$tmp/prefix/lib" "$tmp/run"
cp "$src/CMakeLists.txt" "$tmp/src/"
cp -R "$src/python" "$tmp/src/python"
rm -rf "$tmp/src/python/build" "$tmp/src/python/"*.egg-info
ln -s "$lib" "$tmp/prefix/lib/libgpurun.so.0"

"$py" -m venv --system-site-packages "$tmp/venv" > "$tmp/venv.log" 2>&1 ||
  { cat "$tmp/venv.log"; fail "$py -m venv failed (python3-venv missing? scripts/setup-deps)"; }
vpy=$tmp/venv/bin/python
GPURUN_PREFIX=$tmp/prefix PIP_DISABLE_PIP_VERSION_CHECK=1 "$vpy" -m pip install --no-index \
  --no-build-isolation "$tmp/src/python" > "$tmp/pip.log" 2>&1 ||
  { cat "$tmp/pip.log"; fail "pip install --no-build-isolation ./python failed"; }
echo "ok: pip install ./python into a fresh venv"

cd "$tmp/run" || exit 1
# the version, where the package and the library come from
out=$("$vpy" -c 'import gpurun; print(gpurun.__version__); print(gpurun.__file__); print(gpurun._lib._name)' 2>&1) ||
  fail "import gpurun from the venv: $out"
echo "$out"
[ "$(echo "$out" | sed -n 1p)" = "$want" ] || fail "gpurun.__version__ is not $want"
case $(echo "$out" | sed -n 2p) in "$tmp/venv/"*) ;; *) fail "gpurun was not imported from the venv" ;; esac
[ "$(echo "$out" | sed -n 3p)" = "$tmp/prefix/lib/libgpurun.so.0" ] ||
  fail "the library was not found in the prefix recorded at install"
echo "ok: __version__ $want, package in the venv, library from GPURUN_PREFIX"

# a 2-rank allreduce with the venv's python
cat > "$tmp/run/allreduce.py" <<'PY'
import numpy as np, gpurun
w = gpurun.init()
y = w.allreduce(np.full(5, w.rank + 1.0), op="sum")
ok = y.tolist() == [w.size * (w.size + 1) / 2.0] * 5
line = "rank %d/%d allreduce %s\n" % (w.rank, w.size, "ok" if ok else "WRONG %r" % y.tolist())
with open("rank%d.out" % w.rank, "w") as f:
    f.write(line)
gpurun.finalize()
PY
"$mpirun" -np 2 --oversubscribe "$gpurun" "$vpy" allreduce.py > "$tmp/mpi.out" 2>&1
rc=$?
cat "$tmp/mpi.out"
[ $rc = 0 ] || fail "mpirun -np 2 gpurun VENV/python allreduce.py: exit $rc"
# each rank writes its verdict to a file of its own: mpirun interleaves the ranks' stdout
for r in 0 1; do
  cat "$tmp/run/rank$r.out" 2> /dev/null || fail "rank $r wrote no verdict"
  [ "$(cat "$tmp/run/rank$r.out")" = "rank $r/2 allreduce ok" ] || fail "the allreduce was not right on rank $r"
done
echo "ok: 2-rank allreduce with the venv's python"

# GPURUN_LIB pointing at nothing: an ImportError naming it, no fall-back to the prefix's library
GPURUN_LIB=$tmp/nothing/libgpurun.so.0 "$vpy" -c 'import gpurun' > "$tmp/err" 2>&1 &&
  fail "import gpurun with GPURUN_LIB pointing at nothing succeeded"
cat "$tmp/err"
grep -q "ImportError: gpurun: cannot load libgpurun" "$tmp/err" &&
  grep -q "tried GPURUN_LIB: $tmp/nothing/libgpurun.so.0: no such file" "$tmp/err" ||
  fail "GPURUN_LIB pointing at nothing: the message does not say what was tried"
echo "ok: GPURUN_LIB pointing at nothing is an ImportError that names it"

# GPURUN_LIB pointing at a library: that one, before the recorded prefix's
out=$(GPURUN_LIB=$lib "$vpy" -c 'import gpurun; print(gpurun._lib._name)' 2>&1) ||
  fail "import gpurun with GPURUN_LIB=$lib: $out"
[ "$out" = "$lib" ] || fail "with GPURUN_LIB=$lib: loaded '$out'"
echo "ok: found through GPURUN_LIB"

# no library in the recorded prefix: the loader path (LD_LIBRARY_PATH) finds it by soname, the
# build's (the one mapped)
rm "$tmp/prefix/lib/libgpurun.so.0"
out=$(LD_LIBRARY_PATH=$build${ldpath:+:$ldpath} "$vpy" -c 'import gpurun; print(gpurun._lib._name)' 2>&1) ||
  fail "import gpurun through LD_LIBRARY_PATH: $out"
[ "$out" = libgpurun.so.0 ] || fail "through the loader path: loaded '$out'"
out=$(LD_LIBRARY_PATH=$build${ldpath:+:$ldpath} "$vpy" -c "$libfile" 2>&1) ||
  fail "import gpurun through LD_LIBRARY_PATH: $out"
case $out in "$(cd "$build" && pwd -P)/libgpurun.so"*) ;; *) fail "through the loader path: mapped '$out', not $build's" ;; esac
echo "ok: found through the loader path"

# found nowhere: the message lists the recorded prefix, the venv's prefix and the loader path
# (LD_LIBRARY_PATH holds no libgpurun here; the loader's cache and default directories may)
dflt=
for d in /lib /usr/lib /lib64 /usr/lib64 /lib/*-linux-gnu* /usr/lib/*-linux-gnu*; do
  has_libgpurun "$d" && dflt="$dflt $d"
done
if ldconfig -p 2> /dev/null | grep -q 'libgpurun\.so'; then
  echo "note: a libgpurun is in ld.so.cache: the found-nowhere case cannot be made here"
elif [ -n "$dflt" ]; then
  echo "note: a libgpurun is in the loader's default directories ($dflt): the found-nowhere case cannot be made here"
else
  "$vpy" -c 'import gpurun' > "$tmp/err" 2>&1 && fail "import gpurun with no library anywhere succeeded"
  cat "$tmp/err"
  for w in "the prefix recorded at install (GPURUN_PREFIX): $tmp/prefix/lib/libgpurun.so.0: no such file" \
    "the installed prefix (sys.prefix): $tmp/venv/lib/libgpurun.so.0: no such file" \
    "the loader path: libgpurun.so.0: cannot open shared object file"; do
    grep -qF "$w" "$tmp/err" || fail "found nowhere: the message does not say '$w'"
  done
  echo "ok: found nowhere: the message names every place tried"
fi
echo PASS
