#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# SPDX-FileCopyrightText: 2026 The flotilla authors
"""Extracts the compiled examples from flotilla's documentation.

Every ```cpp block in docs/**/*.md and README.md whose first line is `// doc-example: NAME` is
written to OUT/NAME.cpp, so that the tests compile and run exactly the code the documentation
shows; `// doc-compile: NAME` marks one that is only compiled (it would run too long for a test).
The names of the compile-only ones are listed in OUT/compile_only.txt.
Duplicate names, and names that are not identifiers, are errors. Files that did not change are not
rewritten, so an unchanged page does not trigger a rebuild.

usage: extract_doc_examples.py DOCS_DIR OUT_DIR
"""
import pathlib
import re
import sys

MARKER = re.compile(r"^//\s*doc-(example|compile):\s*([A-Za-z_][A-Za-z0-9_]*)\s*$")


def blocks(text):
    inside, lines = False, []
    for line in text.splitlines():
        if not inside and line.strip() == "```cpp":
            inside, lines = True, []
        elif inside and line.strip() == "```":
            inside = False
            yield lines
        elif inside:
            lines.append(line)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    docs, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    seen, compile_only = {}, []
    pages = sorted(docs.rglob("*.md"))
    readme = docs.parent / "README.md"
    if readme.exists():
        pages.append(readme)
    for page in pages:
        for lines in blocks(page.read_text(encoding="utf-8")):
            if not lines:
                continue
            m = MARKER.match(lines[0].strip())
            if not m:
                continue
            name = m.group(2)
            if m.group(1) == "compile":
                compile_only.append(name)
            if name in seen:
                sys.exit(f"{page}: doc-example '{name}' already defined in {seen[name]}")
            seen[name] = page
            body = f"// Extracted from {page.relative_to(docs.parent)} by scripts/extract_doc_examples.py.\n" + "\n".join(lines) + "\n"
            target = out / f"{name}.cpp"
            if not target.exists() or target.read_text(encoding="utf-8") != body:
                target.write_text(body, encoding="utf-8")
    listing = out / "compile_only.txt"
    text = "\n".join(sorted(compile_only)) + "\n"
    if not listing.exists() or listing.read_text(encoding="utf-8") != text:
        listing.write_text(text, encoding="utf-8")
    for stale in out.glob("*.cpp"):
        if stale.stem not in seen:
            stale.unlink()
    print(";".join(sorted(seen)))


if __name__ == "__main__":
    main()
