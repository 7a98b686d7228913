#!/usr/bin/env python3
"""Fails on any citation of a file that the repository does not contain.

A citation is a Markdown name (`architecture.md`, `docs/security.md`) or a
path under one of the repository's top-level folders (`docs/formats.md`,
`tests/e2e/promise_test.sh`, `coordinator/hang_detector.h`) written in
README.md, docs/*.md, or a comment of a source, CMake or shell file. A path
resolves against the repository root, then against the citing file's folder;
a bare Markdown name also against docs/. Paths with placeholders (`<job>`,
`NAME`, `*`) are not citations of files; `FOLDER/NAME` without an extension
may name a test: a source FOLDER/NAME.* or a test FOLDER/CMakeLists.txt defines.

usage: file_citations_test.py REPO_ROOT
Prints every broken citation as FILE:LINE: NAME and exits 1 if there is one.
"""
import os
import re
import subprocess
import sys

# Folders whose files are cited by path.
TOP = ("bench", "checkpoint", "cmake", "collectives", "common", "coordinator", "docs",
       "fuzz", "launcher", "proto", "scripts", "security", "tests", "worker")
PATH = re.compile(r"(?<![\w./-])((?:%s)/[\w./+*<>-]*[\w+/*>])" % "|".join(TOP))
MARKDOWN = re.compile(r"(?<![\w./-])([\w./-]*[\w-]\.md)\b")
# The comment part of a line of C++, CMake or shell.
SLASHES = re.compile(r"(?<![:/])//(.*)")  # not the "//" of a URL
COMMENT = {".h": SLASHES, ".cc": SLASHES, ".cu": SLASHES, ".proto": SLASHES, ".js": SLASHES,
           ".txt": re.compile(r"(?:^|\s)#(.*)"), ".cmake": re.compile(r"(?:^|\s)#(.*)"),
           ".sh": re.compile(r"(?:^|\s)#(.*)"), ".py": re.compile(r"(?:^|\s)#(.*)")}


def tracked_files(root):
    out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
                         check=True, capture_output=True, text=True).stdout
    return [f for f in out.splitlines() if os.path.exists(os.path.join(root, f))]


def cited_text(path, text):
    """(line number, text) pairs of what `path` says to readers."""
    ext = os.path.splitext(path)[1]
    if ext == ".md":
        return list(enumerate(text.splitlines(), 1))
    if os.path.basename(path) == "CMakeLists.txt":
        ext = ".txt"
    elif path.startswith("scripts/") and ext == "" and text.startswith("#!"):
        ext = ".sh"
    pattern = COMMENT.get(ext)
    if pattern is None:
        return []
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        m = pattern.search(line)
        if m:
            lines.append((number, m.group(1)))
    return lines


def names_a_test(root, name):
    """`tests/security/security_attack_test` or `tests/observability/https_test`: a test
    that folder's CMakeLists.txt defines, or a test's source named without its extension."""
    folder, test = os.path.split(name)
    path = os.path.join(root, folder)
    if "." in test or not os.path.isdir(path):
        return False
    if any(os.path.splitext(f)[0] == test for f in os.listdir(path)):
        return True
    cmake = os.path.join(path, "CMakeLists.txt")
    if not os.path.exists(cmake):
        return False
    with open(cmake, encoding="utf-8") as fh:
        return re.search(r"(?:athanor_test\(|NAME )%s\b" % re.escape(test), fh.read()) is not None


def exists(root, citing, name, markdown):
    candidates = [name, os.path.join(os.path.dirname(citing), name)]
    if markdown:
        candidates.append(os.path.join("docs", name))
    if any(os.path.exists(os.path.join(root, c.rstrip("/"))) for c in candidates):
        return True
    return not markdown and names_a_test(root, name)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    files = [f for f in tracked_files(root) if not f.startswith("build/")]
    broken, checked = [], 0
    for f in files:
        if f.endswith(".md") and not (f == "README.md" or f.startswith("docs/")):
            continue
        try:
            with open(os.path.join(root, f), encoding="utf-8") as fh:
                text = fh.read()
        except (UnicodeDecodeError, IsADirectoryError):
            continue
        for number, line in cited_text(f, text):
            names = [(m, False) for m in PATH.findall(line)] + [(m, True) for m in MARKDOWN.findall(line)]
            for name, markdown in names:
                name = name.rstrip(".")
                parts = name.split("/")
                if re.search(r"[<>*]", name) or any(re.fullmatch(r"[A-Z][A-Z0-9_]+", p) for p in parts):
                    continue  # a pattern or a placeholder (NAME, WORK_DIR), not a file
                checked += 1
                if not exists(root, f, name, markdown):
                    broken.append("%s:%d: %s" % (f, number, name))
    for b in broken:
        print(b)
    print("%d citations checked, %d broken" % (checked, len(broken)))
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
