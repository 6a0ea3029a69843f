"""Bad inputs: the corpus under tests/data/bad/ (cases.yaml), each case in-process."""

from __future__ import annotations

import collections
import contextlib
import hashlib
import io
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final

import msgspec
import yaml

from benchledger.benchmarks.fault_proxy import FaultProxy, http_answer
from benchledger.benchmarks.reliability.scenario import CORPUS, ROOT, Config, Row
from benchledger.harness import settings
from benchledger.harness.settings import Settings
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.verified import import_bundle


class Case(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One bad input: the command, the exit code it must get, what its line must say."""

    id: str
    argv: list[str]
    exit: int
    says: str
    kind: str = ""  # the input kind (protocols, cases, bundles, ledger, cli, peer, platform)
    env: dict[str, str] = {}
    lines: int = 1  # at most this many stderr lines (argparse usage errors print more)
    platform: str = ""  # a broken platform to put behind {platform}


def peer_data(named: str = "") -> str:
    """The peer platform's published folder ({peer} in a case), never copied into the
    project: ``named`` (the settings' peer_data), else ../shared/peers/mcp-data-platform
    beside the checkout; "" if absent."""
    candidates = (
        named,
        os.path.join(ROOT, "..", "shared", "peers", "mcp-data-platform"),
        "/work/shared/peers/mcp-data-platform",  # a CI clone elsewhere on this machine
    )
    found = [c for c in candidates if c and os.path.isdir(os.path.join(c, "bench", "protocols"))]
    return os.path.abspath(found[0]) if found else ""


def needs_peer(case: Case) -> bool:
    """Whether ``case`` reads the peer's folder ({peer})."""
    return any("{peer}" in a for a in case.argv)


def load_cases(path: str = os.path.join(CORPUS, "cases.yaml")) -> list[Case]:
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    return msgspec.convert(data, list[Case])


def _digest(folder: str) -> dict[str, str]:
    """Every file under ``folder`` with its hash; SQLite's shared-memory files and empty
    write-ahead logs (a reader of a WAL database opens them) hold no data and are left out."""
    out = {}
    for dirpath, _, files in os.walk(folder):
        for name in files:
            p = os.path.join(dirpath, name)
            if name.endswith("-shm") or (name.endswith("-wal") and not os.path.getsize(p)):
                continue
            with open(p, "rb") as fh:
                out[os.path.relpath(p, folder)] = hashlib.blake2b(fh.read()).hexdigest()
    return out


def _jsonrpc_id(body: bytes) -> Any:
    try:
        return msgspec.json.decode(body).get("id")
    except (msgspec.DecodeError, AttributeError):
        return None


def _broken(kind: str) -> Callable[[str, str, bytes], bytes | None]:
    """A canned answer for the proxy: a platform that breaks the API in one way."""

    def answer(method: str, path: str, body: bytes) -> bytes | None:
        rest = path.startswith("/api/")
        if kind == "html":
            return http_answer(200, b"<html><body>welcome</body></html>", "text/html")
        if kind == "http500":
            return http_answer(500, b"internal error", "text/plain")
        if kind == "unauthorized":
            return http_answer(401, b'{"title":"Unauthorized","status":401}')
        if kind == "not-jsonrpc" and not rest and method == "POST":
            return http_answer(200, b'{"hello":"world"}')
        if kind == "no-handle" and b'"platform_info"' in body:
            result = {"content": [{"type": "text", "text": "{}"}], "isError": False}
            msg = {"jsonrpc": "2.0", "id": _jsonrpc_id(body), "result": result}
            return http_answer(200, msgspec.json.encode(msg))
        if kind == "rest-html" and rest:
            return http_answer(200, b"<html>login</html>", "text/html")
        if kind == "rest-forbidden" and rest:
            return http_answer(403, b'{"title":"Forbidden","status":403}')
        if kind == "rest-no-list" and rest:
            return http_answer(200, b'{"items":[]}')
        return None

    return answer


class Corpus:
    """The corpus's fixtures (a ledger, a reference platform, broken platforms) and its judge.

    A context manager: ``check(case)`` runs one case in-process through ``main`` and returns
    what is wrong with its answer (empty when it is right).
    """

    def __init__(
        self, workdir: str, main: Callable[[list[str], Settings], int], peer: str = ""
    ) -> None:
        self.workdir = workdir
        self.main = main
        self._stack = contextlib.ExitStack()
        self._proxies: dict[str, str] = {}
        self.peer = peer  # the peer's folder for {peer} ("": cases naming it are skipped)

    def __enter__(self) -> Corpus:
        from benchledger.refplatform.server import RunningPlatform

        self.fixtures = os.path.join(self.workdir, "fixtures")
        os.makedirs(self.fixtures, exist_ok=True)
        self.ledger = os.path.join(self.fixtures, "ledger.sqlite")
        with contextlib.closing(open_store(self.ledger)) as store:
            for bundle in ("good.jsonl", "open.jsonl"):
                path = os.path.join(CORPUS, "bundles", bundle)
                import_bundle(Ledger(store), path, allow_unsealed=True)  # open.jsonl is unsealed
        self.platform = RunningPlatform(pool_size=8)
        self._stack.callback(self.platform.stop)
        self._before = _digest(self.fixtures)
        self._corpus = _digest(CORPUS)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _broken_platform(self, kind: str) -> str:
        if kind not in self._proxies:
            proxy = FaultProxy(
                self.platform.url, rate=0, canned=_broken(kind), log=lambda line: None
            )
            self._proxies[kind] = self._stack.enter_context(proxy).url
        return self._proxies[kind]

    def check(self, case: Case) -> list[str]:
        scratch = os.path.join(self.workdir, "cases", case.id)
        os.makedirs(scratch)
        broken = self._broken_platform(case.platform) if case.platform else ""
        values = {
            "bad": CORPUS,
            "tmp": scratch,
            "ledger": self.ledger,
            "refplatform": self.platform.url,
            "refplatform_port": str(self.platform.port),  # a port in use
            "admin_key": self.platform.admin_key,
            "pool_base": self.platform.pool_base,
            "platform": broken,
            "peer": self.peer,
        }
        argv = [a.format(**values) for a in case.argv]
        env = {k: v.format(**values) for k, v in case.env.items()}
        code, out, err = _invoke(self.main, argv, scratch, env)
        wrong = _judge(case, code, out, err)
        if os.listdir(scratch):
            wrong.append(f"wrote {', '.join(sorted(os.listdir(scratch)))}")
        now = _digest(self.fixtures)
        if now != self._before:
            wrong.append("changed the ledger")
            self._before = now
        now = _digest(CORPUS)
        if now != self._corpus:
            wrong.append("changed the corpus files")
            self._corpus = now
        return wrong


def bad_inputs(cfg: Config) -> Row:
    """Every case of the corpus, in-process: exit code, one line naming it, nothing written."""
    if cfg.main is None or not os.path.isfile(os.path.join(CORPUS, "cases.yaml")):
        return Row(
            "bad inputs",
            "the corpus in tests/data/bad/",
            "no corpus here (it lives in the source checkout)",
            None,
        )
    cases = load_cases()
    peer = peer_data(cfg.settings.peer_data)
    with Corpus(os.path.join(cfg.workdir, "bad"), cfg.main, peer) as corpus:
        skipped = [c for c in cases if needs_peer(c) and not corpus.peer]
        cases = [c for c in cases if c not in skipped]
        return _run_cases(corpus, cases, len(skipped))


def _run_cases(corpus: Corpus, cases: list[Case], skipped: int) -> Row:
    failures: list[str] = []
    kinds: collections.Counter[str] = collections.Counter()
    for case in cases:
        kinds[case.kind] += 1
        failures += [f"{case.id}: {w}" for w in corpus.check(case)]
    by_kind = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    if skipped:  # the peer's folder is not on this machine
        by_kind += f"; {skipped} skipped: no peer data (BENCHLEDGER_PEER_DATA)"
    return Row(
        "bad inputs",
        f"{len(cases)} bad inputs from tests/data/bad/cases.yaml ({by_kind})",
        f"{len(cases) - len({f.split(':')[0] for f in failures})}/{len(cases)} answered with "
        "their documented exit code and one line naming the problem; no traceback; nothing "
        "written",
        not failures,
        problems=failures,
    )


def _invoke(
    main: Callable[[list[str], Settings], int], argv: list[str], cwd: str, env: dict[str, str]
) -> tuple[int, str, str]:
    """Run one case in-process in ``cwd``: its settings are read from its own environment
    (``env`` over a ledger in ``cwd``; an empty value unsets), never from this process's."""
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    environ = {"BENCHLEDGER_LEDGER": os.path.join(cwd, "default-ledger.sqlite"), **env}
    conf = settings.load({k: v for k, v in environ.items() if v})
    try:
        os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), _deadline():
            try:
                code = main(argv, conf)
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 2
            except _CaseOverdue:
                err.write(f"still running after {CASE_DEADLINE_S:g} s: accepted, not refused\n")
                code = -1
            except BaseException as exc:  # a crash is the finding, not the end of the corpus
                err.write(f"Traceback (uncaught): {type(exc).__name__}: {exc}\n")
                code = -1
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()


# A bad input is refused in well under a second; one a change made valid would run (a
# platform it starts serves until stopped): the case fails at this deadline instead of
# hanging the corpus.
CASE_DEADLINE_S: Final = 120.0


class _CaseOverdue(Exception):
    """A case still running at its deadline."""


@contextlib.contextmanager
def _deadline() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only: no deadline off it
        return

    def overdue(signum: int, frame: Any) -> None:
        raise _CaseOverdue

    before = signal.signal(signal.SIGALRM, overdue)
    signal.setitimer(signal.ITIMER_REAL, CASE_DEADLINE_S)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, before)


def _judge(case: Case, code: int, out: str, err: str) -> list[str]:
    wrong = []
    if code != case.exit:
        wrong.append(f"exit {code}, documented {case.exit}")
    text = err if case.exit == 2 else err + out
    if case.says.lower() not in text.lower():
        wrong.append(f"does not say {case.says!r}: {(err or out).strip()[-240:]!r}")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if len(lines) > case.lines:
        wrong.append(f"{len(lines)} lines on stderr: {err.strip()[-240:]!r}")
    if "Traceback" in out + err:
        wrong.append("a traceback")
    return wrong
