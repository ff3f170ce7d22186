"""Print the commands of README.md's first ```bash block, one a line: what a reader runs first.

``.ci/run`` pipes them to ``bash -e`` in a bare virtualenv, so the README's install-and-test commands
are executed exactly as written and can never drift from what CI checks (``tests/test_readme.py``
checks this script against the README).
"""

import pathlib
import sys

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def first_bash_block(text: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index("```bash") + 1
    end = lines.index("```", start)
    return lines[start:end]


if __name__ == "__main__":
    commands = first_bash_block(README.read_text(encoding="utf-8"))
    if not commands:
        sys.exit("README.md: the first ```bash block is empty")
    print("\n".join(commands))
