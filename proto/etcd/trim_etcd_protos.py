#!/usr/bin/env python3
"""Copies etcd's v3 API protos (rpc.proto, kv.proto, auth.proto, as Debian's
golang-etcd-server-dev ships them) into OUT_DIR without what only Go's
generators read: the gogoproto import and options, and the grpc-gateway
annotations (`option (google.api.http) = {...};`). Imports are rewritten to
where the copies lie (proto/etcd/<name>.proto under the build folder), so
protoc needs neither gogoproto nor googleapis. Package names stay as they are:
the services' wire names (etcdserverpb.KV, ...) must match the server's.

usage: trim_etcd_protos.py SRC_DIR OUT_DIR
"""
import os
import re
import sys

# Source path under SRC_DIR -> name of the copy in OUT_DIR.
PROTOS = {
    "etcdserver/etcdserverpb/rpc.proto": "rpc.proto",
    "mvcc/mvccpb/kv.proto": "kv.proto",
    "auth/authpb/auth.proto": "auth.proto",
}
IMPORTS = {
    "etcd/mvcc/mvccpb/kv.proto": "proto/etcd/kv.proto",
    "etcd/auth/authpb/auth.proto": "proto/etcd/auth.proto",
}
DROPPED_IMPORTS = {"gogoproto/gogo.proto", "google/api/annotations.proto"}


def trim(text, name):
    out = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        m = re.fullmatch(r'import\s+"([^"]+)";', stripped)
        if m:
            path = m.group(1)
            if path in DROPPED_IMPORTS:
                i += 1
                continue
            if path not in IMPORTS:
                sys.exit(f"trim_etcd_protos: {name}: unexpected import {path!r}")
            out.append(f'import "{IMPORTS[path]}";')
            i += 1
            continue
        if re.match(r"option\s+\(gogoproto\.", stripped):
            i += 1
            continue
        if re.match(r"option\s+\(google\.api\.http\)", stripped):
            # Skip to the block's closing "};" (the blocks do not nest).
            while i < len(lines) and not lines[i].strip().endswith("};"):
                i += 1
            if i == len(lines):
                sys.exit(f"trim_etcd_protos: {name}: unterminated google.api.http option")
            i += 1
            continue
        # Field options of gogoproto ([(gogoproto.nullable) = false]), if any.
        line = re.sub(r"\s*\[\(gogoproto\.[^\]]*\]", "", line)
        out.append(line)
        i += 1
    result = "\n".join(out) + "\n"
    # What is left must not name what protoc cannot find.
    for word in ("gogoproto", "google.api"):
        if word in result:
            sys.exit(f"trim_etcd_protos: {name}: '{word}' left after trimming")
    return result


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    for rel, copy in PROTOS.items():
        path = os.path.join(src, rel)
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            sys.exit(f"trim_etcd_protos: {path}: {e.strerror} (run scripts/install-deps)")
        trimmed = trim(text, rel)
        dest = os.path.join(out, copy)
        # Rewrite only on change, so that protoc does not rerun needlessly.
        try:
            with open(dest, encoding="utf-8") as f:
                if f.read() == trimmed:
                    continue
        except OSError:
            pass
        with open(dest, "w", encoding="utf-8") as f:
            f.write(trimmed)


if __name__ == "__main__":
    main()
