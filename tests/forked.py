"""``benchledger ARGV`` as in a fresh interpreter, without starting an interpreter per command.

One server interpreter imports what every command imports first (``benchledger.cli``),
then forks a child per command: the child's ``sys.modules`` and entry points are a fresh
interpreter's at that point (nothing a command loads or registers is loaded yet). The child
takes the command's working folder, extra ``sys.path`` entries and environment, runs
``cli.main(argv)`` with its stdout and stderr in files, and writes its exit code and loaded
module names to a report. Starting Python and importing the CLI costs a second or more per
command on a loaded 2-core machine; a fork costs milliseconds. A test of the process
boundary itself (signals, ``python -m``, exit at interpreter shutdown) still starts one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SERVER = """
import json, os, sys
from benchledger import cli
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(job["out"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        os.dup2(os.open(job["err"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        status = 1
        try:
            os.chdir(job["cwd"])
            sys.path[:0] = job["path"]
            os.environ.update(job["env"])
            try:
                code = cli.main(job["argv"])
            except SystemExit as exit_:  # --version prints and exits from argparse
                code = exit_.code
            with open(job["report"], "w") as out:
                json.dump({"code": code, "modules": sorted(sys.modules)}, out)
            status = 0
        except BaseException:
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


class Forked:
    """What one forked command did: its exit code, output, error output and modules."""

    def __init__(self, returncode: int, stdout: str, stderr: str, modules: list[str]) -> None:
        self.returncode, self.stdout, self.stderr, self.modules = (
            returncode, stdout, stderr, modules,
        )  # fmt: skip


class Forks:
    """The server interpreter (module doc); ``run`` forks one command from it."""

    def __init__(self) -> None:
        self.server = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ},
        )

    def run(
        self,
        argv: Sequence[str],
        *,
        path: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str = REPO,
    ) -> Forked:
        """``benchledger ARGV`` in a fresh child with ``path`` first on ``sys.path`` and
        ``env`` added to its environment."""
        assert self.server.stdin is not None and self.server.stdout is not None
        with tempfile.TemporaryDirectory(prefix="forked-") as folder:
            files = {k: os.path.join(folder, k) for k in ("out", "err", "report")}
            job: dict[str, Any] = {"argv": list(argv), "cwd": cwd, "path": list(path),
                                   "env": dict(env or {}), **files}  # fmt: skip
            self.server.stdin.write(json.dumps(job) + "\n")
            self.server.stdin.flush()
            status = self.server.stdout.readline()
            err = _read(files["err"])
            assert status.strip() == "0", (status, err)
            report = json.loads(_read(files["report"]))
            return Forked(report["code"], _read(files["out"]), err, report["modules"])

    def close(self) -> None:
        assert self.server.stdin is not None
        self.server.stdin.close()
        assert self.server.wait(timeout=60) == 0


def _read(path: str) -> str:
    if not os.path.exists(path):
        return ""
    with open(path, encoding="utf-8") as fh:
        return fh.read()
