#!/usr/bin/python3
"""Every status a public call returns is listed in its section-3 man page.

usage: check_status_pages.py SRCDIR --static
       check_status_pages.py SRCDIR --run COMMAND...

The functions are the GR_API functions returning gr_status of include/gpurun/coll.h, runtime.h,
pool.h and dpool.h. A function's page is man/man3/NAME.3 (following one '.so' link); it lists a
status when the status's name appears in the page's ERRORS section, or in the ERRORS section of a
page its ERRORS says "Any code of NAME(3)" of, and GR_OK when the RETURN VALUE section names it.
Pages document a family of calls together, so a status listed for one call of a page counts as
listed for all of them.

--run runs COMMAND (status_calls under mpirun) and reads its lines "FUNCTION STATUS case": it fails
naming the function, the status, the case and the page for every status the page does not list,
for every public function the program never called, and when the program fails or prints a line
starting "# " with "FAILED".

--static reads the library's sources (collectives/, runtime/, tasks/, base/): every
gr__fail(GR_ERR_..., NAME, ...) whose call name resolves to a public function's name, directly (a
string literal, a local "static const char fn[] = ..." or "const char *call = ...") or through
helpers that pass their own parameter on as the call name (followed through any depth of calls
within the sources), must name a status the page lists. What it cannot see, and says so in its
summary: a status held in a variable (gr__fail(st, fn, ...): the backends' gr__comm_err codes,
statuses passed up from helpers that return without recording a sentence), call names read from
a structure (q->fn, y->fn), calls through function pointers (the backends' ops, the paths' rows),
and whether a helper's failing branch can be reached from a given caller (a helper's statuses are
attributed to every public function that passes its name to it).
"""
import os
import re
import subprocess
import sys

SRC = sys.argv[1]
MODE = sys.argv[2] if len(sys.argv) > 2 else "--static"
MAN3 = os.path.join(SRC, "man", "man3")
HEADERS = ("coll.h", "runtime.h", "pool.h", "dpool.h")
LIBDIRS = ("collectives", "runtime", "tasks", "base")

errors = []


def fail(msg):
    errors.append(msg)


def strip_comments(text):
    """Comments out, string literals kept (a '/*' inside a string stays)."""
    out, i, n = [], 0, len(text)
    tok = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', re.S)
    for m in tok.finditer(text):
        out.append(text[i:m.start()])
        t = m.group(0)
        out.append(t if t[0] in "\"'" else (" " if t.startswith("//") else
                                              " " + "\n" * t.count("\n")))
        i = m.end()
    out.append(text[i:])
    return "".join(out)


# ---- the public functions ---------------------------------------------------------------------
functions = {}  # name -> header
for h in HEADERS:
    with open(os.path.join(SRC, "include", "gpurun", h), encoding="utf-8") as fh:
        text = strip_comments(fh.read()).replace("\\\n", " ")
    for m in re.finditer(r"\bGR_API\s+gr_status\s+(gr_\w+)\s*\(", text):
        functions[m.group(1)] = h
if len(functions) < 50:
    fail("found only %d gr_status functions in %s: the extraction is broken"
         % (len(functions), ", ".join(HEADERS)))

# ---- the pages --------------------------------------------------------------------------------
page_src = {}


def read_page(name):
    if name not in page_src:
        path = os.path.join(MAN3, name)
        page_src[name] = open(path, encoding="utf-8").read() if os.path.exists(path) else None
    return page_src[name]


def resolve(name):
    src = read_page(name)
    if src is None:
        return None
    m = re.match(r"\.so\s+man3/(\S+)\s*$", src.strip())
    return m.group(1) if m else name


rendered = {}


def render(page):
    if page not in rendered:
        r = subprocess.run(["groff", "-man", "-Tascii", "-P-c", "-P-b", "-P-u", "-rLL=200n",
                            "man3/" + page], cwd=os.path.join(SRC, "man"), capture_output=True,
                           text=True)
        rendered[page] = r.stdout
    return rendered[page]


def section(text, title):
    out, inside = [], False
    for l in text.split("\n"):
        if l and not l[0].isspace():
            inside = l.strip() == title
            continue
        if inside:
            out.append(l)
    return re.sub(r"-\n\s*", "", "\n".join(out))  # words hyphenated across lines


listed_cache = {}


def listed(page, depth=0):
    """The statuses page lists: its ERRORS, the pages ERRORS names with "Any code of", GR_OK."""
    if page in listed_cache:
        return listed_cache[page]
    text = render(page)
    errs, ret = section(text, "ERRORS"), section(text, "RETURN VALUE")
    codes = set(re.findall(r"\bGR_(?:OK|ERR_[A-Z_]+)\b", errs))
    if re.search(r"\bGR_OK\b", ret):
        codes.add("GR_OK")
    for m in re.finditer(r"[Aa]ny code of((?:\s*(?:,|or|and)?\s*gr_\w+\s?\(3\))+)", errs):
        for ref in re.findall(r"(gr_\w+)\s?\(3\)", m.group(1)):
            target = resolve(ref + ".3")
            if target and depth < 3:
                codes |= listed(target, depth + 1) - {"GR_OK"}
    listed_cache[page] = codes
    return codes


pages = {}
for f in sorted(functions):
    p = resolve(f + ".3")
    if p is None:
        fail("%s has no page man/man3/%s.3" % (f, f))
    else:
        pages[f] = p
        if not section(render(p), "ERRORS"):
            fail("%s: its page %s has no ERRORS section" % (f, p))


# What the static pass attributes to a function but the function cannot return, and why (checked by
# reading the code; the dynamic pass still checks what the calls return).
UNREACHABLE = {
    (f, "GR_ERR_MISMATCH"): "check mode's fingerprint exchange (validate.c) runs for collectives "
    "only (is_collective() in calls.c and request.c); point-to-point calls have no agreement"
    for f in ("gr_send", "gr_recv", "gr_isend", "gr_irecv")
}


def check(fn, status, why, verb="returned"):
    """False (and a failure) when fn's page does not list status."""
    if fn not in pages:
        return True
    if status in listed(pages[fn]):
        return True
    fail("%s %s %s (%s), which its page man/man3/%s does not list (%s)"
         % (fn, verb, status, why, pages[fn], "RETURN VALUE" if status == "GR_OK" else "ERRORS"))
    return False


# ---- --run: what the program saw ---------------------------------------------------------------
def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    seen = {}  # (fn, status) -> first case
    ncalls, called = 0, set()
    for line in r.stdout.split("\n"):
        m = re.match(r"^(gr_\w+) (GR_\w+) (\S.*)$", line.strip())
        if m:
            ncalls += 1
            called.add(m.group(1))
            seen.setdefault((m.group(1), m.group(2)), m.group(3))
        elif line.startswith("# ") and "FAILED" in line:
            fail("the program says: " + line[2:])
    if r.returncode != 0:
        fail("%s exited with %d:\n%s\n%s" % (" ".join(cmd), r.returncode, r.stdout[-3000:],
                                            r.stderr[-3000:]))
    for (fn, st), why in sorted(seen.items()):
        if fn not in functions:
            fail("the program printed %s, which is not a gr_status function of %s"
                 % (fn, ", ".join(HEADERS)))
            continue
        check(fn, st, "case " + why)
    for fn in sorted(set(functions) - called):
        fail("%s (%s) was never called by the program" % (fn, functions[fn]))
    statuses = {st for (_, st) in seen}
    print("check_status_pages: %d lines, %d of %d functions called, %d distinct statuses, %d "
          "(function, status) pairs over %d pages" % (ncalls, len(called & set(functions)),
                                                      len(functions), len(statuses), len(seen),
                                                      len({pages.get(f) for f, _ in seen})))
    for line in r.stdout.split("\n"):
        if line.startswith("# "):
            print("check_status_pages: program: " + line[2:])


# ---- --static: gr__fail calls in the sources ---------------------------------------------------
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else", "case", "defined",
            "_Alignof", "_Static_assert", "__attribute__", "alignof", "typeof"}


def split_args(s):
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        out.append(cur.strip())
    return out


def match_paren(text, i):
    """Index of the ')' matching the '(' at i (strings already made harmless)."""
    depth = 0
    for j in range(i, len(text)):
        if text[j] == "(":
            depth += 1
        elif text[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def static_pass():
    defs = {}  # name -> (params, body, file, body offset line)
    for d in LIBDIRS:
        for f in sorted(os.listdir(os.path.join(SRC, d))):
            if not f.endswith(".c"):
                continue
            path = os.path.join(SRC, d, f)
            with open(path, encoding="utf-8") as fh:
                raw = strip_comments(fh.read())
            strs = []

            def keep(m):
                strs.append(m.group(0))
                return "__S%d__" % (len(strs) - 1)

            text = re.sub(r'"(?:\\.|[^"\\\n])*"', keep, raw)
            text = re.sub(r"'(?:\\.|[^'\\\n])*'", "' '", text)
            filestatic = {}  # file-level static const char X[] = "gr_..."
            for m in re.finditer(r"\bconst\s+char\s*(?:\*\s*(?:const\s+)?)?(\w+)\s*(?:\[\s*\])?\s*"
                                 r"=\s*__S(\d+)__\s*;", text):
                filestatic[m.group(1)] = strs[int(m.group(2))].strip('"')
            depth, i = 0, 0
            while i < len(text):
                ch = text[i]
                if ch == "{":
                    if depth == 0:
                        j = i - 1
                        while j >= 0 and text[j].isspace():
                            j -= 1
                        if j >= 0 and text[j] == ")":
                            # the '(' of the parameter list, then the name before it
                            d2, k = 0, j
                            while k >= 0:
                                if text[k] == ")":
                                    d2 += 1
                                elif text[k] == "(":
                                    d2 -= 1
                                    if d2 == 0:
                                        break
                                k -= 1
                            m = re.search(r"(\w+)\s*$", text[:k])
                            if m and m.group(1) not in KEYWORDS:
                                # the body
                                d3, e = 0, i
                                while e < len(text):
                                    if text[e] == "{":
                                        d3 += 1
                                    elif text[e] == "}":
                                        d3 -= 1
                                        if d3 == 0:
                                            break
                                    e += 1
                                params = []
                                for p in split_args(text[k + 1:j]):
                                    pm = re.search(r"(\w+)\s*(?:\[[^\]]*\])?\s*$", p)
                                    params.append(pm.group(1) if pm else "")
                                defs[m.group(1)] = (params, text[i:e + 1], strs, filestatic,
                                                    "%s/%s:%d" % (d, f,
                                                                  text[:i].count("\n") + 1))
                                i = e + 1
                                continue
                    depth += 1
                elif ch == "}":
                    depth -= 1
                i += 1

    direct = {}  # (function, param index) -> {(status, where)}
    attributed = {}  # public name -> {(status, where)}
    edges = []  # (callee, arg index, ("lit", name) | ("param", caller, index))
    unseen = {"status in a variable": 0, "name not resolved": 0}

    def source_of(arg, fname, params, body, strs, filestatic):
        arg = arg.strip()
        m = re.fullmatch(r"__S(\d+)__", arg)
        if m:
            return ("lit", strs[int(m.group(1))].strip('"'))
        if re.fullmatch(r"\w+", arg):
            lm = re.search(r"\bconst\s+char\s*(?:\*\s*(?:const\s+)?)?%s\s*(?:\[\s*\])?\s*="
                           r"\s*__S(\d+)__" % re.escape(arg), body)
            if lm:
                return ("lit", strs[int(lm.group(1))].strip('"'))
            if arg in params:
                return ("param", fname, params.index(arg))
            if arg in filestatic:
                return ("lit", filestatic[arg])
        return None

    for fname, (params, body, strs, filestatic, where) in defs.items():
        for m in re.finditer(r"\b(\w+)\s*\(", body):
            callee = m.group(1)
            if callee in KEYWORDS:
                continue
            close = match_paren(body, m.end() - 1)
            if close < 0:
                continue
            args = split_args(body[m.end():close])
            line = where.split(":")[0] + ":%d" % (int(where.split(":")[1]) +
                                                 body[:m.start()].count("\n"))
            if callee == "gr__fail" and len(args) >= 2:
                codes = set(re.findall(r"\bGR_ERR_[A-Z_]+\b", args[0]))
                if not codes:
                    unseen["status in a variable"] += 1
                    continue
                src = source_of(args[1], fname, params, body, strs, filestatic)
                if src is None:
                    unseen["name not resolved"] += 1
                    continue
                for c in codes:
                    if src[0] == "lit":
                        attributed.setdefault(src[1], set()).add((c, line))
                    else:
                        direct.setdefault((fname, src[2]), set()).add((c, line))
            elif callee in defs:
                for ai, a in enumerate(args):
                    src = source_of(a, fname, params, body, strs, filestatic)
                    if src is not None:
                        edges.append((callee, ai, src))
    changed = True
    while changed:
        changed = False
        for callee, ai, src in edges:
            got = direct.get((callee, ai))
            if not got:
                continue
            if src[0] == "lit":
                dst = attributed.setdefault(src[1], set())
            else:
                dst = direct.setdefault((src[1], src[2]), set())
            if not got <= dst:
                dst |= got
                changed = True
    npairs, skipped = 0, 0
    for fn in sorted(functions):
        for code, line in sorted(attributed.get(fn, ())):
            npairs += 1
            if (fn, code) in UNREACHABLE:
                skipped += 1
                continue
            check(fn, code, "gr__fail at %s" % line, "can return")
    print("check_status_pages: static: %d functions defined in %s, %d public functions with a "
          "status found, %d (function, status, place) triples; not seen: %d gr__fail calls whose "
          "status is a variable, %d whose call name is not resolved (q->fn, y->fn, ...)"
          % (len(defs), "/".join(LIBDIRS), len([f for f in functions if attributed.get(f)]),
             npairs, unseen["status in a variable"], unseen["name not resolved"]))
    print("check_status_pages: static: %d triples left out as unreachable (UNREACHABLE)" % skipped)


if MODE == "--run":
    run(sys.argv[3:])
elif MODE == "--static":
    static_pass()
else:
    fail("unknown mode %s" % MODE)
for e in errors:
    print("check_status_pages: " + e)
print("check_status_pages: %d problem(s)" % len(errors))
sys.exit(1 if errors else 0)
