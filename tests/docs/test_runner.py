#!/usr/bin/python3
"""The docs runner's rules on the pages in tests/docs/data/ (see run_guide.py for the rules).

usage: test_runner.py TESTS_DOCS_DIR SOURCE_DIR BUILD_DIR
"""
import os
import subprocess
import sys

here, src, build = sys.argv[1:4]


def run(page):
    p = subprocess.run(["/usr/bin/python3", os.path.join(here, "run_guide.py"), src, build,
                        os.path.join(here, "data", page)], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=50)
    print(f"== {page}: exit {p.returncode}\n{p.stdout}")
    return p.returncode, p.stdout


bad = []
rc, out = run("good.md")
if rc != 0:
    bad.append("good.md: expected exit 0")
if out.count("(output compared)") != 5:
    bad.append("good.md: expected 5 compared outputs (an alt shape among them)")
if "SKIP tests/docs/data/good.md:35: needs a GPU" not in out:
    bad.append("good.md: the skipped block is not reported with its reason")
if "6 blocks run, 1 skipped, 0 failed" not in out:
    bad.append("good.md: wrong summary")

rc, out = run("shape.md")
if rc != 1 or "output differs in shape" not in out or "rank # on HOST: GPU #" not in out:
    bad.append("shape.md: a changed shape must fail and show both shapes")

rc, out = run("fail.md")
if rc != 1 or "FAIL tests/docs/data/fail.md:3: the block failed (exit 1)" not in out:
    bad.append("fail.md: a failing command must fail its block")
if "before" not in out or "after\n" in out:
    bad.append("fail.md: the block must stop at the failing command and show its output")
if "NOT RUN tests/docs/data/fail.md:9" not in out:
    bad.append("fail.md: the block after a failure must be reported as not run")

for b in bad:
    print("FAIL:", b)
sys.exit(1 if bad else 0)
