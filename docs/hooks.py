"""MkDocs hooks for this site (mkdocs.yml): README.md is the home page and CHANGELOG.md the
changelog, read from the repository root, and the links between them and docs/ are rewritten
from the repository's paths (as GitHub shows them) to the site's."""

from __future__ import annotations

import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[1]
FROM_ROOT = {"index.md": "README.md", "changelog.md": "CHANGELOG.md"}


def on_files(files, config):
    for uri, source in FROM_ROOT.items():
        files.append(File.generated(config, uri, content=(ROOT / source).read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri in FROM_ROOT:
        markdown = re.sub(r"\]\(docs/", "](", markdown)
        return _root_links(markdown, "")
    return _root_links(markdown, "../")


def _root_links(markdown: str, prefix: str) -> str:
    """``](<prefix>README.md...)`` and ``](<prefix>CHANGELOG.md...)`` as the site's pages."""
    for uri, source in FROM_ROOT.items():
        markdown = markdown.replace(f"]({prefix}{source}", f"]({uri}")
    return markdown
