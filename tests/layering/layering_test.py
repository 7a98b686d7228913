#!/usr/bin/env python3
"""Every `#include "..."` in the repository keeps to the layering in rules.txt.

Two graphs: between top-level folders (common/ depends on nothing of ours,
coordinator/ never on worker/ ...) and between the coordinator's rooms
(coordinator/core/ never on coordinator/rpc/ ...). A file's own folder or room
is always allowed. Fails naming each include that breaks a rule, each folder or
room the rules do not place, and any cycle in the rules themselves.

  layering_test.py [REPO_ROOT]   (default: two folders up from this script)
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = re.compile(r"\.(h|hh|hpp|c|cc|cpp|cu|cuh)$")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SKIP_DIRS = {".git", "third_party"}


def parse_rules(path):
    """{section: {name: set(deps)}}, {section: {name: set(test-only deps)}}."""
    rules, test_rules, section = {}, {}, None
    for lineno, raw in enumerate(open(path), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            rules[section], test_rules[section] = {}, {}
            continue
        if section is None or ":" not in line:
            sys.exit(f"{path}:{lineno}: expected [section] or 'NAME: DEPS', got {raw.strip()!r}")
        name, deps = line.split(":", 1)
        name = name.strip()
        table = rules[section]
        if name.endswith(" tests"):
            name, table = name[: -len(" tests")].strip(), test_rules[section]
        table[name] = set(deps.split())
    return rules, test_rules


def find_cycle(graph):
    """A cycle in {node: deps} as a list, or None."""
    state = {}

    def visit(node, path):
        state[node] = "open"
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == "open":
                return path[path.index(dep):] + [dep] if dep in path else [node, dep]
            if dep not in state:
                cycle = visit(dep, path + [dep])
                if cycle:
                    return cycle
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node, [node])
            if cycle:
                return cycle
    return None


def room_of(path, rooms):
    """The coordinator room of a repository path under coordinator/."""
    rel = path[len("coordinator/"):]
    for room in sorted(rooms, key=len, reverse=True):  # store/sqlite before store
        if room != "main" and rel.startswith(room + "/"):
            return room
    return "main" if "/" not in rel else None


def is_test(path):
    name = os.path.basename(path)
    return "_test." in name or name.startswith("test_util")


def sources(root):
    """Source files, as repository paths; build folders (build*/) left out."""
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in SKIP_DIRS and not d.startswith(".")
            and not (rel_dir == "." and d.startswith("build")))
        for f in sorted(filenames):
            if SOURCE.search(f):
                yield os.path.normpath(os.path.join(rel_dir, f))


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", ".."))
    rules, test_rules = parse_rules(os.path.join(HERE, "rules.txt"))
    top, rooms = rules["top"], rules["coordinator"]
    errors = []
    for section, graph in rules.items():
        for name, deps in graph.items():
            for dep in deps | test_rules[section].get(name, set()):
                if dep not in graph:
                    errors.append(f"rules.txt [{section}]: {name} names {dep}, which has no rule")
        cycle = find_cycle(graph)
        if cycle:
            errors.append(f"rules.txt [{section}]: cycle {' -> '.join(cycle)}")
    top_dirs = {d for d in os.listdir(root)
                if os.path.isdir(os.path.join(root, d)) and not d.startswith(".")
                and not d.startswith("build") and d not in SKIP_DIRS}
    checked = 0
    for path in sources(root):
        src_top = path.split("/", 1)[0]
        if "/" not in path:
            continue
        if src_top not in top:
            errors.append(f"{path}: folder {src_top}/ has no rule in tests/layering/rules.txt")
            continue
        src_room = room_of(path, rooms) if src_top == "coordinator" else None
        if src_top == "coordinator" and src_room is None:
            errors.append(f"{path}: coordinator/{path.split('/')[1]}/ is not a room in rules.txt")
            continue
        for lineno, line in enumerate(open(os.path.join(root, path), errors="replace"), 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            dst_top = target.split("/", 1)[0]
            if "/" not in target or dst_top not in top_dirs:
                continue  # a third-party header or one beside the file
            checked += 1
            where = f"{path}:{lineno}: #include \"{target}\""
            allowed_top = set(top[src_top])
            if is_test(path):
                allowed_top |= test_rules["top"].get(src_top, set())
            if dst_top != src_top and dst_top not in allowed_top:
                errors.append(f"{where}: {src_top}/ may not include {dst_top}/ "
                              f"(allowed: {' '.join(sorted(allowed_top)) or 'nothing'})")
            if src_top == "coordinator" and dst_top == "coordinator":
                dst_room = room_of(target, rooms)
                if dst_room is None or dst_room == "main":
                    errors.append(f"{where}: not a header of a coordinator room")
                    continue
                allowed = set(rooms[src_room])
                if is_test(path):
                    allowed |= test_rules["coordinator"].get(src_room, set())
                if dst_room != src_room and dst_room not in allowed:
                    errors.append(f"{where}: room {src_room} may not include room {dst_room} "
                                  f"(allowed: {' '.join(sorted(allowed)) or 'nothing'})")
    for e in errors:
        print(e)
    if errors:
        print(f"layering_test: {len(errors)} violation(s); rules in tests/layering/rules.txt")
        return 1
    print(f"layering_test: {checked} includes keep to tests/layering/rules.txt")
    return 0


if __name__ == "__main__":
    sys.exit(main())
