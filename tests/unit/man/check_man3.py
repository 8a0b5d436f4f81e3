#!/usr/bin/python3
"""Every public name of include/gpurun/*.h has a section-3 man page in man/man3/ that renders
without warnings, whose SYNOPSIS matches the headers and whose EXAMPLE compiles.

usage: check_man3.py SRCDIR BUILDDIR CC [INCLUDE_DIR...]

Names come from the headers themselves (comments stripped): every GR_API function, every gr_*
typedef and struct tag, every GR_* macro and every GR_* enumerator (names ending in '_' are
private). For each function, type and macro man/man3/NAME.3 must exist (a page or a '.so' link to
one) and the page it leads to must list NAME in its NAME section; every enumerator must appear in
the text of some page. Each page must render with groff -man -ww and no warning; each
declaration in a rendered SYNOPSIS must be a declaration of the header it includes (normalised
white space), each function's page must show the header's prototype, and each EXAMPLE must
compile with CC -fsyntax-only against the headers. References NAME(3) in the pages and "see
NAME(3)" in the header comments must lead to pages.
"""
import os
import re
import subprocess
import sys
import tempfile

SRC, BUILD, CC = sys.argv[1], sys.argv[2], sys.argv[3]
INCS = [d for a in sys.argv[4:] for d in a.split(";") if d]
HDIR = os.path.join(SRC, "include", "gpurun")
MANROOT = os.path.join(SRC, "man")
MAN3 = os.path.join(MANROOT, "man3")

errors = []


def fail(msg):
    errors.append(msg)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return text.replace("\\\n", " ")


def norm(s):
    """Declarations compare equal whatever their white space and line breaks."""
    s = re.sub(r"\bGR_API\b", " ", s)
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"\s*([()\[\]{},;*])\s*", r"\1", s)
    return s


# ---- the headers ---------------------------------------------------------------------------
headers = {}  # "coll.h" -> comment-stripped text
raw_comments = {}  # "coll.h" -> full text
for f in sorted(os.listdir(HDIR)):
    if not (f.endswith(".h") or f.endswith(".h.in")):
        continue
    name = f[:-3] if f.endswith(".in") else f
    with open(os.path.join(HDIR, f), encoding="utf-8") as fh:
        raw = fh.read()
    raw_comments[name] = raw
    headers[name] = strip_comments(raw)


def expanded(name):
    """The header with its own macros expanded (GR_STATUS_MAP's enum) and other headers left out."""
    text = "\n".join(l for l in headers[name].split("\n") if not re.match(r"\s*#\s*include", l))
    r = subprocess.run([CC, "-E", "-P", "-x", "c", "-"], input=text, capture_output=True,
                       text=True)
    if r.returncode != 0:
        fail("cannot preprocess %s: %s" % (name, r.stderr.strip()))
        return ""
    return r.stdout


functions, types, macros, enumerators = {}, {}, {}, {}
prototypes = {}  # function -> normalised prototype
for h, text in headers.items():
    for m in re.finditer(r"\bGR_API\b([^;(]*?)\b(gr_\w+)\s*\(([^;]*);", text):
        functions[m.group(2)] = h
        prototypes[m.group(2)] = norm(m.group(0)[:-1])
    for m in re.finditer(r"\}\s*(gr_\w+)\s*;", text):
        types[m.group(1)] = h
    for m in re.finditer(r"\btypedef\b[^;{}()]*?\b(gr_\w+)\s*;", text):
        types[m.group(1)] = h
    for m in re.finditer(r"\btypedef\b[^;{}]*?\(\s*\*\s*(gr_\w+)\s*\)", text):
        types[m.group(1)] = h
    for m in re.finditer(r"\bstruct\s+(gr_\w+)\s*\{", text):
        types[m.group(1)] = h
    for m in re.finditer(r"^\s*#\s*define\s+(GR_\w+)", text, flags=re.M):
        if not m.group(1).endswith("_"):
            macros[m.group(1)] = h
    for m in re.finditer(r"\benum\b[^{;]*\{([^}]*)\}", text):
        for item in m.group(1).split(","):
            e = re.match(r"\s*(GR_\w+)", item)
            if e and not e.group(1).endswith("_"):
                enumerators[e.group(1)] = h
    for m in re.finditer(r"\bX\(\s*(GR_\w+)\s*,", text):
        enumerators[m.group(1)] = h

if len(functions) < 50 or not types or not macros or not enumerators:
    fail("found only %d functions, %d types, %d macros, %d enumerators in %s: the extraction "
         "is broken" % (len(functions), len(types), len(macros), len(enumerators), HDIR))

reference = {}  # header -> normalised text that SYNOPSIS declarations must come from
for h in headers:
    reference[h] = norm(headers[h]) + "\n" + norm(expanded(h))

# ---- the pages -----------------------------------------------------------------------------
pages = sorted(f for f in os.listdir(MAN3) if f.endswith(".3")) if os.path.isdir(MAN3) else []
source = {}
for p in pages:
    with open(os.path.join(MAN3, p), encoding="utf-8") as fh:
        source[p] = fh.read()


def resolve(page, depth=0):
    """The page a name's file leads to (following one '.so man3/x.3')."""
    m = re.match(r"\.so\s+man3/(\S+)\s*$", source[page].strip())
    if not m:
        return page
    target = m.group(1)
    if depth or target not in source:
        fail("%s: '.so man3/%s' does not lead to a page" % (page, target))
        return None
    return resolve(target, depth + 1)


def render(page, extra=()):
    cmd = ["groff", "-man", "-Tascii", "-P-c", "-P-b", "-P-u"] + list(extra)
    return subprocess.run(cmd + ["man3/" + page], cwd=MANROOT, capture_output=True, text=True)


real = [p for p in pages if resolve(p) == p]
text, namesec = {}, {}
for p in real:
    w = subprocess.run(["groff", "-man", "-Tascii", "-ww", "-z", "man3/" + p], cwd=MANROOT,
                       capture_output=True, text=True)
    if w.returncode != 0 or w.stderr.strip():
        fail("%s: groff -man -ww: %s" % (p, w.stderr.strip() or "exit %d" % w.returncode))
    r = render(p, ["-rLL=200n"])
    text[p] = r.stdout
    m = re.search(r"^\.SH\s+NAME\s*\n(.*?)\s\\-\s", source[p], flags=re.M | re.S)
    if not m:
        fail("%s: no NAME section of the form 'name, name \\- what'" % p)
        namesec[p] = set()
        continue
    namesec[p] = {n.strip().replace("\\_", "_") for n in m.group(1).replace("\\fB", "")
                  .replace("\\fR", "").split(",")}


def section(rendered, title):
    """The lines of one section of rendered text, without the heading."""
    lines = rendered.split("\n")
    out, inside = [], False
    for l in lines:
        if l and not l[0].isspace():  # a heading, or the page's footer
            inside = bool(re.match(r"^[A-Z][A-Z ]+$", l)) and l.strip() in title
            continue
        if inside:
            out.append(l)
    return out


for p in real:
    heads = set(re.findall(r"^\.SH\s+\"?([A-Z ]+?)\"?\s*$", source[p], flags=re.M))
    for need in ("NAME", "SYNOPSIS", "DESCRIPTION", "SEE ALSO"):
        if need not in heads:
            fail("%s: no %s section" % (p, need))
    documented = [n for n in namesec[p] if n in functions]
    if any(prototypes[n].startswith("gr_status") for n in documented):
        for need in ("RETURN VALUE", "ERRORS"):
            if need not in heads:
                fail("%s: documents a call returning gr_status but has no %s section" % (p, need))

# Every public name opens a page that lists it.
for kind, names in (("function", functions), ("type", types), ("macro", macros)):
    for n, h in sorted(names.items()):
        f = n + ".3"
        if f not in source:
            fail("%s %s (%s) has no page: man/man3/%s is missing" % (kind, n, h, f))
            continue
        target = resolve(f)
        if target and n not in namesec.get(target, set()):
            fail("%s %s: man/man3/%s leads to %s, whose NAME section does not list it"
                 % (kind, n, f, target))
alltext = "\n".join(text.values())
for n, h in sorted(enumerators.items()):
    if not re.search(r"\b%s\b" % n, alltext):
        fail("enumerator %s (%s) appears in no page" % (n, h))
# Every name a NAME section lists has its own file, so that man 3 NAME finds it.
for p in real:
    for n in namesec[p]:
        if n + ".3" not in source:
            fail("%s lists %s in NAME but man/man3/%s.3 is missing" % (p, n, n))
# References lead somewhere.
for p in real:
    for ref in set(re.findall(r"\b((?:gr|gpurun)[a-z0-9_]*)\s?\(3\)", text[p])):
        if ref + ".3" not in source:
            fail("%s refers to %s(3), which has no page" % (p, ref))
for h, raw in raw_comments.items():
    for ref in set(re.findall(r"\b((?:gr|gpurun)[a-z0-9_]*)\(3\)", raw)):
        if ref + ".3" not in source:
            fail("%s refers to %s(3), which has no page" % (h, ref))

# SYNOPSIS: declarations come from the included headers; each function shows its prototype.
ndecls = 0
for p in real:
    syn = "\n".join(section(text[p], ("SYNOPSIS",)))
    syn = strip_comments(syn)
    incs = re.findall(r"#include\s*<gpurun/([\w.]+)>", syn)
    if not incs:
        fail("%s: SYNOPSIS includes no <gpurun/...> header" % p)
    for i in incs:
        if i not in headers:
            fail("%s: SYNOPSIS includes <gpurun/%s>, which does not exist" % (p, i))
    incs = [i for i in incs if i in headers]
    if any(n in functions for n in namesec[p]) and "-lgpurun" not in syn:
        fail("%s: SYNOPSIS does not say to link with -lgpurun" % p)
    ref = "\n".join(reference[i] for i in incs)
    body = []
    for l in syn.split("\n"):
        s = l.strip()
        if s.startswith("#define"):
            if norm(s) not in "\n".join(norm(headers[i]) for i in incs):
                fail("%s: SYNOPSIS '%s' is not in %s" % (p, s, ", ".join(incs)))
        elif not s.startswith("#") and not s.startswith("Link with") and not s.startswith(
                "Compile and link"):
            body.append(s)
    decls, depth, cur = [], 0, ""
    for ch in " ".join(body):
        cur += ch
        if ch in "({":
            depth += 1
        elif ch in ")}":
            depth -= 1
        elif ch == ";" and depth == 0:
            decls.append(cur.strip())
            cur = ""
    if cur.strip():
        fail("%s: SYNOPSIS has text that is not a declaration: '%s'" % (p, cur.strip()))
    shown = {norm(d).rstrip(";") for d in decls}
    ndecls += len(decls)
    for d in decls:
        if norm(d) not in ref:
            fail("%s: SYNOPSIS declaration '%s' is not in %s" % (p, norm(d), ", ".join(incs)))
    for n in namesec[p]:
        if n in functions:
            if functions[n] not in incs:
                fail("%s: %s is declared in %s, which the SYNOPSIS does not include"
                     % (p, n, functions[n]))
            if prototypes[n] not in shown:
                fail("%s: SYNOPSIS does not show %s's prototype '%s'" % (p, n, prototypes[n]))

# EXAMPLE: compiles against the headers.
nexamples = 0
with tempfile.TemporaryDirectory() as tmp:
    for p in real:
        ex = section(text[p], ("EXAMPLE", "EXAMPLES"))
        if not ex:
            continue
        code = [l for l in ex]
        ind = min((len(l) - len(l.lstrip()) for l in code if l.strip()), default=0)
        code = "\n".join(l[ind:] for l in code) + "\n"
        src = os.path.join(tmp, p.replace(".", "_") + ".c")
        with open(src, "w", encoding="utf-8") as fh:
            fh.write(code)
        cmd = [CC, "-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
               "-I", os.path.join(SRC, "include"), "-I", os.path.join(BUILD, "include")]
        for d in INCS:
            cmd += ["-I", d]
        r = subprocess.run(cmd + [src], capture_output=True, text=True)
        nexamples += 1
        if r.returncode != 0:
            fail("%s: EXAMPLE does not compile:\n%s" % (p, r.stderr.strip()))

for e in errors:
    print("check_man3: " + e)
print("check_man3: %d pages (%d with text), %d functions, %d types, %d macros, %d enumerators, "
      "%d SYNOPSIS declarations, %d examples compiled; %d problem(s)"
      % (len(pages), len(real), len(functions), len(types), len(macros), len(enumerators), ndecls,
         nexamples, len(errors)))
sys.exit(1 if errors else 0)
