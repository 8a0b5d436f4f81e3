#!/usr/bin/env python3
"""List the GPU code an executable embeds, for scripts/device-kit where cuobjdump is absent.

    device-kit-fatbin.py FILE   ->  e.g. "ptx_80 sm_80 ptx_90 sm_90"

Reads the CUDA fat binaries in FILE: a header (magic 0xBA55ED50, version u16, header size u16,
payload size u64), then entries (kind u16: 1 = PTX, 2 = machine code; entry header size u32 at
offset 4; payload size u64 at offset 8; the compute capability u32 at offset 28, e.g. 90)."""
import struct
import sys

MAGIC = struct.pack("<I", 0xBA55ED50)


def archs(data):
    found = set()
    i = data.find(MAGIC)
    while i >= 0:
        _, hsize, fsize = struct.unpack_from("<HHQ", data, i + 4)
        p, end = i + hsize, i + hsize + fsize
        while p + 32 <= end:
            kind, _, ehsize, psize = struct.unpack_from("<HHIQ", data, p)
            (arch,) = struct.unpack_from("<I", data, p + 28)
            if ehsize < 32:
                break
            found.add(("ptx" if kind == 1 else "sm" if kind == 2 else f"kind{kind}", arch))
            p += ehsize + psize
        i = data.find(MAGIC, max(end, i + 4))
    return sorted(found, key=lambda k: (k[1], k[0]))


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], "rb") as f:
        print(" ".join(f"{k}_{a}" for k, a in archs(f.read())))


if __name__ == "__main__":
    main()
