"""The long description PyPI shows: README.md with its links into the source tree made
plain text.

README.md links to the documentation by relative paths (``docs/writer.md``), which work
in the source tree and break on a package index, where they resolve against the index's
own pages. The project has no public home yet to turn them into absolute addresses, so
each such link becomes its text followed by the file's path, a file the source
distribution carries (MANIFEST.in). Everything else, the metadata included, is in
setup.cfg.
"""

from __future__ import annotations

import re
from pathlib import Path

from setuptools import setup

#: A Markdown link whose target is neither an address with a scheme nor an anchor.
_RELATIVE_LINK = re.compile(r"\[([^\]]+)\]\((?![a-z][a-z0-9+.-]*:|#)([^)\s]+)\)")


def pypi_description(readme: str) -> str:
    """``readme`` with every relative link replaced by its text and the file's path."""

    def plain(match: re.Match[str]) -> str:
        text, path = match.group(1), match.group(2)
        return f"`{path}`" if text.strip("`") == path else f"{text} (`{path}`)"

    return _RELATIVE_LINK.sub(plain, readme)


if __name__ == "__main__":
    setup(
        long_description=pypi_description(Path(__file__).with_name("README.md").read_text()),
    )
