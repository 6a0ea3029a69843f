"""The build's packages, found in the folders pyproject.toml's ``package-dir`` maps.

``benchledger.NAME`` is built from the top-level folder ``NAME``, never through the link
``benchledger/NAME``: a checkout without symbolic links (``git -c core.symlinks=false``,
Git for Windows' default, turns each link into a small text file) builds the same wheel.
setuptools cannot list a mapped folder's subpackages from pyproject.toml alone, so this
file does; the sdist carries the links again, so its tests run from it as from a checkout
(docs/architecture.md, "One namespace").
"""

from __future__ import annotations

import os
import tomllib

from setuptools import find_packages, setup
from setuptools.command.sdist import sdist

ROOT = os.path.dirname(os.path.abspath(__file__))
NAMESPACE = "benchledger"

with open(os.path.join(ROOT, "pyproject.toml"), "rb") as fh:
    PACKAGE_DIR: dict[str, str] = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]


def _packages() -> list[str]:
    """Every package under each mapped folder, named from its mapping; a package another
    mapping names (``benchledger.ledger`` inside ``benchledger/``, when the links are there)
    comes from that mapping only."""
    found: list[str] = []
    for package, folder in PACKAGE_DIR.items():
        if not os.path.isfile(os.path.join(ROOT, folder, "__init__.py")):
            raise SystemExit(f"pyproject.toml: package-dir maps {package} to {folder}/, "
                             "which holds no __init__.py")  # fmt: skip
        others = [p for p in PACKAGE_DIR if p.startswith(package + ".")]
        for sub in [
            package,
            *(f"{package}.{s}" for s in find_packages(os.path.join(ROOT, folder))),
        ]:
            if not any(sub == o or sub.startswith(o + ".") for o in others):
                found.append(sub)
    return sorted(found)


class _Sdist(sdist):
    """The source distribution with the namespace's links, as a checkout has them."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        for package, folder in PACKAGE_DIR.items():
            name = package.removeprefix(NAMESPACE + ".")
            if name != package:
                link = os.path.join(base_dir, NAMESPACE, name)
                if not os.path.lexists(link):
                    os.symlink(os.path.join("..", folder), link)


setup(packages=_packages(), cmdclass={"sdist": _Sdist})
