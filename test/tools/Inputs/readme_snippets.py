"""Checks that README.md's ```mlir snippets and the given spec files are the
same texts, both ways: every snippet is one of the files (which the lit test
compiles and checks), and every file is a snippet. Usage:
readme_snippets.py README.md spec.mlir..."""
import re
import sys
import textwrap

readme = open(sys.argv[1]).read()
# A fenced block, possibly indented (inside a list item).
blocks = [textwrap.dedent(body) for _, body in re.findall(
    r"^( *)```mlir\n(.*?)^ *```", readme, flags=re.S | re.M)]
files = {path: open(path).read() for path in sys.argv[2:]}
failed = False
for block in blocks:
    if block not in files.values():
        print("README.md: a ```mlir snippet that no spec file holds:\n" +
              block)
        failed = True
for path, text in files.items():
    if text not in blocks:
        print(path + ": not a ```mlir snippet of README.md (update one of "
              "them)")
        failed = True
print("%d snippets, %d files: %s" % (len(blocks), len(files),
                                     "mismatch" if failed else "same"))
sys.exit(1 if failed else 0)
