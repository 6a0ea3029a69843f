"""Headless Chromium for the browser tests: where it is, how it is started, and one measure.

A page is rendered with one appended script that measures the laid-out page and writes what
it found into a ``<pre id="measured">``, which ``--dump-dom`` hands back. Debian's
``chromium`` package is enough; where it is absent the tests are skipped with that reason
(``.ci/run`` installs it).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any, TypeVar

import pytest

T = TypeVar("T")

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None
)
_skip_without_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (apt-get install -y chromium; .ci/run does)",
)


def needs_chromium(test: T) -> T:
    """A test that lays a page out in headless Chromium: skipped without it, and slow (a
    browser starts per measurement), so the README's test command leaves it to .ci/run."""
    return pytest.mark.slow(_skip_without_chromium(test))


# No network, no first-run work, no GPU: a page load and a DOM dump, the same on every machine.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def dump_dom(
    url: str, profile: Path, width: int = 1400, height: int = 1000, *extra: str
) -> subprocess.CompletedProcess[str]:
    """Chromium's DOM of ``url`` after layout, in a ``width`` × ``height`` window, with a fresh
    ``profile`` folder (``extra``: more flags, e.g. a virtual time budget)."""
    assert CHROMIUM is not None
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--window-size={width},{height}", f"--user-data-dir={profile}",
         *extra, "--dump-dom", url],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def measured(
    page: Path, script: str, tmp: Path, width: int = 1400, height: int = 1000
) -> dict[str, Any]:
    """What ``script`` found in ``page`` at ``width`` px (it writes ``<pre id="measured">``)."""
    probe = tmp / f"probe-{page.stem}-{width}.html"
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    res = dump_dom(probe.as_uri(), tmp / f"chromium-profile-{width}", width, height)
    found = re.search(r'<pre id="measured">(.*?)</pre>', res.stdout, re.S)
    assert found, f"chromium exit {res.returncode}, no measurement: {res.stderr[-2000:]}"
    seen = json.loads(html.unescape(found.group(1)))
    assert "error" not in seen, seen["error"]
    return seen
