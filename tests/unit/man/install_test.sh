#!/bin/sh
# install_test.sh SRC_DIR BUILD_DIR
# Install the tree into a scratch prefix; then man(1) must find every page of man/man3/ there under
# its own name (man 3 gr_iallreduce opens the gr_allreduce page through its '.so' link) and render
# it.
set -eu
src=$1 build=$2
work=$(mktemp -d /tmp/gpurun-man3.XXXXXX)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
man=$work/prefix/share/man
fails=0 n=0
for f in "$src"/man/man3/*.3; do
  name=$(basename "$f" .3)
  n=$((n + 1))
  if [ ! -f "$man/man3/$name.3" ]; then
    echo "install_test: $name.3 is not installed under $man/man3" >&2
    fails=$((fails + 1))
    continue
  fi
  where=$(MANPATH=$man man -w 3 "$name" 2>/dev/null || true)
  case $where in
  "$man"/man3/*.3) ;;
  *)
    echo "install_test: man -w 3 $name gives '$where', not a page under $man" >&2
    fails=$((fails + 1))
    ;;
  esac
done
# One page through its link, rendered the way a user reads it.
text=$(MANPATH=$man MANPAGER=cat MANWIDTH=100 man 3 gr_iallreduce 2>/dev/null)
echo "$text" | grep -q "gr_status gr_iallreduce(" || {
  echo "install_test: man 3 gr_iallreduce does not show its prototype" >&2
  fails=$((fails + 1))
}
echo "install_test: $n names checked under $man, $fails problem(s)"
[ "$fails" -eq 0 ]
