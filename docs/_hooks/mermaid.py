"""mkdocs hook: the diagrams' script is served by the site itself, never from a CDN.

Material for MkDocs draws ```` ```mermaid ```` blocks with mermaid.js, which it loads from
``unpkg.com`` unless a global ``mermaid`` already exists. This hook puts a pinned
mermaid release into the built site (``js/mermaid.min.js``) and loads it in the ``<head>``
of each page with a diagram, before Material's bundle, so readers' browsers fetch nothing
from another host.

The file comes from the npm registry's tarball of :data:`VERSION`, checked against the
registry's published SHA-512 (:data:`INTEGRITY`), and is cached outside the repository
(``mermaid/`` under ``$KAFKA_TXN_CACHE``, else ``$XDG_CACHE_HOME/pyspark-kafka-txn``, else
``~/.cache/pyspark-kafka-txn``: where the tests keep Kafka's jars), so only the first
build on a machine downloads it (about 1 MiB compressed).

Configured in ``mkdocs.yml`` under ``hooks:``; this directory is excluded from the site.
"""

from __future__ import annotations

import base64
import hashlib
import io
import logging
import os
import tarfile
import urllib.request
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page

logger = logging.getLogger("mkdocs.hooks.mermaid")

VERSION = "11.6.0"
TARBALL = f"https://registry.npmjs.org/mermaid/-/mermaid-{VERSION}.tgz"
#: ``npm view mermaid@11.6.0 dist.integrity``.
INTEGRITY = "sha512-PE8hGUy1LDlWIHWBP05SFdqUHGmRcCcK4IzpOKPE35eOw+G9zZgcnMpyunJVUEOgb//KBORPjysKndw8bFLuRg=="
MEMBER = "package/dist/mermaid.min.js"
SITE_PATH = "js/mermaid.min.js"


def _cache() -> Path:
    explicit = os.environ.get("KAFKA_TXN_CACHE")
    xdg = os.environ.get("XDG_CACHE_HOME")
    root = Path(explicit) if explicit else Path(xdg or Path.home() / ".cache") / "pyspark-kafka-txn"
    return root / "mermaid" / VERSION / "mermaid.min.js"


def script() -> bytes:
    """mermaid.min.js of :data:`VERSION`, from the cache or the npm registry."""
    cached = _cache()
    if cached.is_file():
        return cached.read_bytes()
    logger.info("fetching mermaid %s from %s", VERSION, TARBALL)
    try:
        with urllib.request.urlopen(TARBALL, timeout=60) as answer:
            tarball = answer.read()
    except OSError as exc:
        raise PluginError(f"cannot fetch mermaid {VERSION} from {TARBALL}: {exc}") from exc
    digest = "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
    if digest != INTEGRITY:
        raise PluginError(f"mermaid {VERSION} from {TARBALL} does not match its SHA-512")
    with tarfile.open(fileobj=io.BytesIO(tarball), mode="r:gz") as archive:
        member = archive.extractfile(MEMBER)
        if member is None:
            raise PluginError(f"{TARBALL} has no {MEMBER}")
        data = member.read()
    cached.parent.mkdir(parents=True, exist_ok=True)
    partial = cached.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(cached)
    return data


def on_post_page(output: str, page: Page, config: MkDocsConfig) -> str:
    """On a page with a diagram, load the site's own mermaid in ``<head>``: before
    Material's bundle (at the end of ``<body>``) looks for a global ``mermaid``."""
    if 'class="mermaid"' not in output:
        return output
    up = "../" * page.url.count("/")
    return output.replace("</head>", f'<script src="{up}{SITE_PATH}"></script></head>', 1)


def on_post_build(config: MkDocsConfig) -> None:
    """Write mermaid.min.js into the built site."""
    target = Path(config.site_dir) / SITE_PATH
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(script())
