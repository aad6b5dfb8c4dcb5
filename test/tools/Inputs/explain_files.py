"""Helpers of explain.test (attnc explain), without NumPy.

  explain_files.py png FILE...   prints "NAME: PNG WIDTHxHEIGHT" per file
                                 (the signature and the IHDR chunk), and
                                 fails on a file that is not a PNG;
  explain_files.py doc-ids OUT N D
                                 writes a .npy (v1, <i4) of N document ids,
                                 D documents of equal length.
"""
import os
import struct
import sys


def png(paths):
    ok = True
    for path in paths:
        with open(path, "rb") as f:
            head = f.read(24)
        name = os.path.basename(path)
        if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
            print("%s: not a PNG" % name)
            ok = False
            continue
        width, height = struct.unpack(">II", head[16:24])
        print("%s: PNG %dx%d" % (name, width, height))
    return 0 if ok else 1


def doc_ids(out, n, docs):
    header = "{'descr': '<i4', 'fortran_order': False, 'shape': (%d,), }" % n
    header += " " * (63 - (10 + len(header)) % 64) + "\n"
    with open(out, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode())
        f.write(struct.pack("<%di" % n, *[i * docs // n for i in range(n)]))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "png":
        sys.exit(png(sys.argv[2:]))
    sys.exit(doc_ids(sys.argv[2], int(sys.argv[3]), int(sys.argv[4])))
