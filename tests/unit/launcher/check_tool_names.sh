#!/bin/sh
# The standalone tools (tools/) share no code and no names: every global symbol a tool's own
# objects define starts with that tool's prefix, and no name is defined by two tools.
# usage: check_tool_names.sh NAME:PREFIX OBJ... -- NAME:PREFIX OBJ... -- ...
set -u
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
status=0
while [ $# -gt 0 ]; do
  spec=$1
  shift
  name=${spec%%:*}
  prefix=${spec#*:}
  : > "$dir/$name.objs"
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    printf '%s\n' "$1" >> "$dir/$name.objs"
    shift
  done
  [ $# -gt 0 ] && shift
  [ -s "$dir/$name.objs" ] || { echo "FAIL: tool $name: no objects given"; exit 1; }
  xargs nm -g --defined-only < "$dir/$name.objs" | awk 'NF == 3 { print $3 }' | sort -u \
    > "$dir/$name.def"
  [ -s "$dir/$name.def" ] || { echo "FAIL: tool $name: nm shows no symbols"; exit 1; }
  bad=$(grep -v "^$prefix" "$dir/$name.def")
  if [ -n "$bad" ]; then
    echo "FAIL: $name defines global names without its prefix $prefix:"
    printf '%s\n' "$bad" | sed 's/^/  /' | head -20
    status=1
  else
    echo "ok: $name defines $(wc -l < "$dir/$name.def") global names, each $prefix*"
  fi
  sed "s/^/$name /" "$dir/$name.def" >> "$dir/all"
done
dups=$(awk '{ print $2 }' "$dir/all" | sort | uniq -d)
if [ -n "$dups" ]; then
  echo "FAIL: global names defined by more than one tool:"
  printf '%s\n' "$dups" | sed 's/^/  /' | head -20
  status=1
fi
[ $status -eq 0 ] && echo "ok: no two tools define the same name"
exit $status
