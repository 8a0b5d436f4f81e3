#!/usr/bin/env python3
"""Turn `ctest --show-only=json-v1 -L gpu` into the device kit's plain list of test commands.

    device-kit-tests.py CTEST_JSON BUILD_DIR SOURCE_DIR OUT_SH

OUT_SH gets one line per test, for run.sh to source with its own `t` function:
    t NAME TIMEOUT SKIP_RC ENV=VALUE... -- COMMAND ARG...
every word double-quoted, with the build directory written as ${KIT}/build, the source tree as
${REPO} and the MPI launcher as ${MPIRUN}, so that the list runs wherever the kit and the checkout
are. Prints the build-relative paths of the files the commands use (to be copied into the kit).
"""
import json
import os
import sys


def quote(word, build, src, files):
    """One word, double-quoted for sh, with the machine-specific prefixes made variables."""
    if os.path.isabs(word) and os.path.basename(word) in ("mpiexec", "mpirun", "orterun") \
            and not word.startswith(build + "/"):
        return '"${MPIRUN}"'
    if word in ("/bin/bash", "/usr/bin/bash", "/bin/sh", "/usr/bin/sh"):
        return '"' + os.path.basename(word) + '"'  # from PATH: the GPU machine's may live elsewhere
    out = word.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$").replace("`", "\\`")
    for prefix, var in ((build, "${KIT}/build"), (src, "${REPO}")):
        if prefix and prefix in out:
            # Files of the build that a command names are copied into the kit.
            for part in word.replace("=", " ").replace(":", " ").split():
                if part.startswith(build + "/") and os.path.isfile(part):
                    files.add(os.path.relpath(part, build))
            out = out.replace(prefix, var)
    return '"' + out + '"'


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    data_path, build, src, out_path = sys.argv[1:]
    build = os.path.realpath(build)
    src = os.path.realpath(src)
    with open(data_path, encoding="utf-8") as f:
        data = json.load(f)
    files = set()
    lines = ["# gpu-labelled tests of the build, made by scripts/device-kit from ctest's list;",
             "# run.sh defines t() and sources this file."]
    for test in data.get("tests", []):
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        name = test["name"]
        if not name.replace("_", "").replace("-", "").replace(".", "").isalnum():
            sys.exit(f"device-kit-tests: unexpected test name {name!r}")
        command = test.get("command") or []
        if not command:
            continue
        timeout = int(float(props.get("TIMEOUT", 300)))
        skip_rc = int(props.get("SKIP_RETURN_CODE", -1))
        env = props.get("ENVIRONMENT", [])
        words = [quote(w, build, src, files) for w in env] + ["--"] + \
                [quote(w, build, src, files) for w in command]
        lines.append(f"t {name} {timeout} {skip_rc} " + " ".join(words))
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    for rel in sorted(files):
        print(rel)


if __name__ == "__main__":
    main()
