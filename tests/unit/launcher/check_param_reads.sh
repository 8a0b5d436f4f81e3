#!/bin/sh
# The GPURUN_* variables are declared once (base/param.c, gr_param.h):
# 1. no source outside base/param.c calls getenv (or secure_getenv) on a GPURUN_ name: the
#    library, gpurun and the tools read them through the table (tests excepted);
# 2. every GPURUN_ name the product's sources mention (C, Python, shell, man pages) is a row of the
#    table (`gpurun --help-env`), unless it is a macro (#define, #ifndef, CMake, config.h.in).
# usage: check_param_reads.sh SOURCE_DIR GPURUN
set -u
src=$1
gpurun=$2
status=0
cd "$src" || exit 1
areas="base launcher monitor runtime collectives tasks tools python bench examples include"
# the pattern finds what it must: the table's own reader
grep -q 'getenv(d->name)' base/param.c || { echo "FAIL: base/param.c no longer reads getenv(d->name)"; exit 1; }
hits=$(grep -rnE '(secure_)?getenv\("GPURUN_' $areas --include='*.c' --include='*.h' \
         --include='*.cc' --include='*.cpp' --include='*.cu' | grep -v '^base/param\.c:')
if [ -n "$hits" ]; then
  echo "FAIL: GPURUN_* read with getenv outside base/param.c (use gr__param_*, gr_param.h):"
  printf '%s\n' "$hits"
  status=1
else
  echo "ok: no getenv(\"GPURUN_...\") outside base/param.c"
fi
table=$("$gpurun" --help-env | sed -n 's/^  \(GPURUN_[A-Z0-9_]*\) .*/\1/p' | sort -u)
[ -n "$table" ] || { echo "FAIL: gpurun --help-env lists no variable"; exit 1; }
macros=$( { grep -rhoE '#[[:space:]]*(define|ifndef|ifdef|if defined\(?)[[:space:]]*GPURUN_[A-Z0-9_]+' \
              $areas cmake CMakeLists.txt 2>/dev/null | grep -oE 'GPURUN_[A-Z0-9_]+';
            grep -rhoE 'GPURUN_[A-Z0-9_]+' CMakeLists.txt cmake base/config.h.in \
              $(find $areas -name CMakeLists.txt) 2>/dev/null; } | sort -u)
named=$(grep -rhoE '\bGPURUN_[A-Z0-9_]*[A-Z0-9]\b' $areas --include='*.c' --include='*.h' \
          --include='*.py' --include='*.sh' --include='*.1' --include='*.3' | sort -u)
missing=""
for n in $named; do
  printf '%s\n' "$table" | grep -qx "$n" && continue
  printf '%s\n' "$macros" | grep -qx "$n" && continue
  missing="$missing $n"
done
if [ -n "$missing" ]; then
  echo "FAIL: GPURUN_* names in the sources that base/param.c's table does not list:$missing"
  status=1
else
  echo "ok: every GPURUN_* name in the sources is in the table ($(printf '%s\n' "$table" | wc -l) rows)"
fi
exit $status
