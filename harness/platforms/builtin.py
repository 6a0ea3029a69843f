"""benchledger's own platforms, each one ``Platform`` (harness/platforms/platform.py).

``embedded`` (alias ``embedded:thread``) serves a fresh refplatform in this process;
``embedded:process`` serves it as a child process; an ``http(s)://`` URL (``url``) is a
running mcp-data-platform shared by every pass; ``server-memory[@VERSION]`` runs
@modelcontextprotocol/server-memory over stdio; ``basic-memory[@VERSION]`` runs PyPI
basic-memory over streamable HTTP; ``mcp:FILE`` runs any MCP memory server its mapping
file describes (harness/platforms/mcp_mapping.py). Their provisioners live in
``provision.py`` (a mapped server's in ``generic_mcp.py``), their log twins in
``replay/log_*.py``.
"""

from __future__ import annotations

import re
import shlex
import urllib.parse
from collections.abc import Mapping
from typing import ClassVar, Final

from benchledger.harness.platforms.mem0_platform import MEM0 as MEM0  # docs/mem0.md
from benchledger.harness.platforms.platform import (
    Platform,
    PlatformOption,
    PlatformSpec,
    Provision,
    Provisioner,
)
from benchledger.harness.platforms.servers import (
    BASIC_MEMORY_CMD,
    BASIC_MEMORY_PYPI,
    BASIC_MEMORY_VERSION,
    EXACT_VERSION,
    SERVER_MEMORY_CMD,
    SERVER_MEMORY_PACKAGE,
    SERVER_MEMORY_VERSION,
    basic_memory_url,
)
from benchledger.ledger.events import PlatformRecord

# A live replay re-drives units on the embedded mcp-data-platform.
_LOG_ONLY = "a live replay re-drives units on the embedded mcp-data-platform: use --tools log"


class Embedded(Platform):
    """A fresh refplatform per runtime, in this process (on the run's event loop)."""

    name = "embedded"
    summary = "benchledger's reference platform in this process (the default)"
    kinds = ("embedded",)
    seeded = True
    replay = "benchledger.replay.log_platform:LogPlatform"
    live_replay = True
    options: ClassVar[tuple[PlatformOption, ...]] = (
        PlatformOption(
            "--pack",
            "embedded: the seed pack (a folder in the peer's seed layout, e.g. "
            "../shared/peers/mcp-data-platform/bench/seed); default: benchledger's own",
            "PATH",
        ),
        PlatformOption(
            "--embedder",
            "embedded: what search and duplicate detection embed with: lexical (default), "
            "wordllama (semantic, offline; the wordllama extra) or ollama:MODEL@URL",
            "SPEC",
            recorded=True,  # it decides what search finds: a resume must not change it
        ),
    )

    def usage(self) -> str:
        return "embedded"

    def settle(self, spec: PlatformSpec, options: Mapping[str, str]) -> PlatformSpec:
        """As is, once ``--embedder`` (if given) loads: ValueError naming it otherwise."""
        if options.get("embedder"):
            from benchledger.harness.platforms import embedded  # the refplatform door

            embedded.check_embedder(options["embedder"])  # cached: the provisioner's is this one
        return spec

    def parse(self, text: str) -> PlatformSpec | None:
        return PlatformSpec("embedded") if text in ("embedded", "embedded:thread") else None

    def provisioner(self, spec: PlatformSpec, provision: Provision) -> Provisioner:
        from benchledger.harness.platforms.provision import EmbeddedProvisioner

        return EmbeddedProvisioner(
            spec,
            pool_size=provision.pool_size,
            pack=provision.pack,
            embedder=provision.options.get("embedder", ""),
        )


class EmbeddedProcess(Embedded):
    """The reference platform as a child process (``python -m benchledger.refplatform``)."""

    name = "embedded:process"
    summary = "benchledger's reference platform as a child process (another core)"
    kinds = ("process",)

    def usage(self) -> str:
        return "embedded:process"

    def parse(self, text: str) -> PlatformSpec | None:
        return PlatformSpec("process") if text == "embedded:process" else None


class Url(Platform):
    """A running mcp-data-platform at a URL, shared by every pass; reset between passes."""

    name = "url"
    summary = "a running mcp-data-platform at an http(s):// URL, shared by every pass"
    kinds = ("external",)
    shared = True
    replay = "benchledger.replay.log_platform:LogPlatform"
    live_replay = True
    options: ClassVar[tuple[PlatformOption, ...]] = (
        PlatformOption("--admin-key", "external platform (or $BENCHLEDGER_ADMIN_KEY)", "K",
                       setting="admin_key"),
        PlatformOption("--pool-base", "external: keys are B-001..B-N (or "
                       "$BENCHLEDGER_POOL_BASE)", "B", setting="pool_base"),
        PlatformOption("--pool-size", "external platform: pool size", "N", whole=True),
        PlatformOption("--reset-cmd", "external platform: run between passes", "CMD"),
    )  # fmt: skip

    def usage(self) -> str:
        return "an http(s):// URL"

    def parse(self, text: str) -> PlatformSpec | None:
        if not text.startswith(("http://", "https://")):
            return None
        return PlatformSpec("external", external_url(text))

    def provisioner(self, spec: PlatformSpec, provision: Provision) -> Provisioner:
        from benchledger.harness.platforms.provision import ExternalProvisioner

        return ExternalProvisioner(
            spec,
            pool_size=provision.pool_size,
            admin_key=provision.admin_key,
            pool_base=provision.pool_base,
            reset_cmd=provision.reset_cmd,
            k=provision.k,
            timeout_s=provision.settings.platform_timeout_s,
        )


def external_url(text: str) -> str:
    """The platform's base URL: a host, a port in 1..65535, no credentials; ``/mcp`` dropped.

    The one place a platform URL is checked and normalised, so ``URL`` and ``URL/mcp``
    (the endpoint ``platform serve`` prints) name the same platform in a run record.
    """
    # The URL is recorded in the ledger, so it must carry no credentials; nor do messages.
    problem = "--platform " + repr(re.sub(r"//[^/]*@", "//***@", text))
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError as exc:  # "Invalid IPv6 URL", a port that is no number or > 65535
        port_problem = "port" in str(exc).lower()
        detail = "the port must be a number in 1..65535" if port_problem else f"not a URL ({exc})"
        raise ValueError(f"{problem}: {detail}") from None
    if not parts.hostname:
        raise ValueError(f"{problem}: the URL has no host, e.g. http://127.0.0.1:8098")
    if port == 0:
        raise ValueError(f"{problem}: the port must be a number in 1..65535")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"{problem}: the URL must not carry credentials; give --admin-key")
    if parts.query or parts.fragment:
        raise ValueError(f"{problem}: give the platform's base URL, without a query")
    path = parts.path.rstrip("/").removesuffix("/mcp").rstrip("/")
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def _command(text: str, prefix: str, option: str, what: str) -> None:
    """A recorded ``PREFIX CMD`` form: ValueError unless CMD is a usable command."""
    try:
        argv = shlex.split(text.removeprefix(prefix))
    except ValueError as exc:
        raise ValueError(f"{option}: {exc}") from None
    if not argv or any("<redacted>" in a for a in argv):
        raise ValueError(
            f"{option}: give {what} (a recorded command with redacted secrets must be given again)"
        )


class ServerMemory(Platform):
    """@modelcontextprotocol/server-memory over stdio; each runtime gets a fresh folder."""

    name = "server-memory"
    summary = "@modelcontextprotocol/server-memory over stdio (npm-installed on first use)"
    kinds = ("stdio",)
    replay = "benchledger.replay.log_server_memory:LogServerMemory"
    options: ClassVar[tuple[PlatformOption, ...]] = (
        PlatformOption(
            "--server-memory-cmd",
            "server-memory: start the server with CMD instead of the npm install "
            "(e.g. 'node /path/to/server-memory/dist/index.js')",
            "CMD",
            purpose="starts server-memory with the given command",
        ),
    )

    def parse(self, text: str) -> PlatformSpec | None:
        """``server-memory[@VERSION]``; ``npm:PACKAGE@VERSION`` and ``server-memory-cmd:CMD``
        are how a run record names it, accepted so a resume reaches the same platform."""
        npm = f"npm:{SERVER_MEMORY_PACKAGE}@"
        if text == "server-memory" or text.startswith(("server-memory@", npm)):
            version = text.rpartition("@")[2] if "@" in text else SERVER_MEMORY_VERSION
            if not EXACT_VERSION.match(version):
                raise ValueError(
                    f"--platform {text!r}: pin an exact npm version, e.g. "
                    f"server-memory@{SERVER_MEMORY_VERSION} (see `npm view "
                    f"{SERVER_MEMORY_PACKAGE} versions`)"
                )
            return PlatformSpec("stdio", npm + version)
        if text.startswith(SERVER_MEMORY_CMD):
            _command(text, SERVER_MEMORY_CMD, "--server-memory-cmd",
                     "the command that starts the server")  # fmt: skip
            return PlatformSpec("stdio", text)
        return None

    def settle(self, spec: PlatformSpec, options: Mapping[str, str]) -> PlatformSpec:
        cmd = options.get("server_memory_cmd", "")
        if not cmd:
            return spec
        if spec.url != f"npm:{SERVER_MEMORY_PACKAGE}@{SERVER_MEMORY_VERSION}":
            raise ValueError(
                "--server-memory-cmd starts server-memory with the given command: use it with "
                "--platform server-memory (no @VERSION: the command decides the version)"
            )
        found = self.parse(SERVER_MEMORY_CMD + cmd)
        assert found is not None
        return found

    def provisioner(self, spec: PlatformSpec, provision: Provision) -> Provisioner:
        from benchledger.harness.platforms.provision import ServerMemoryProvisioner

        return ServerMemoryProvisioner(
            spec, pool_size=provision.pool_size, npm_dir=provision.settings.npm_dir
        )


class BasicMemory(Platform):
    """basic-memory over streamable HTTP; each runtime gets a fresh folder and server."""

    name = "basic-memory"
    summary = "PyPI basic-memory over streamable HTTP (pip-installed on first use)"
    kinds = ("basic-memory",)
    replay = "benchledger.replay.log_basic_memory:LogBasicMemory"
    options: ClassVar[tuple[PlatformOption, ...]] = (
        PlatformOption(
            "--basic-memory-cmd",
            "basic-memory: the basic-memory command of a server you installed (the harness "
            "adds `mcp --transport streamable-http ...`), instead of the pip install",
            "CMD",
            purpose="starts basic-memory with the given command",
        ),
        PlatformOption(
            "--basic-memory-python",
            "basic-memory: the Python >= 3.12 to install it with (default: the first found "
            "on PATH or in ~/.pyenv/versions)",
            "PATH",
            purpose="names the Python basic-memory is installed with",
        ),
    )

    def parse(self, text: str) -> PlatformSpec | None:
        url = basic_memory_url(text)
        return PlatformSpec("basic-memory", url) if url else None

    def settle(self, spec: PlatformSpec, options: Mapping[str, str]) -> PlatformSpec:
        cmd = options.get("basic_memory_cmd", "")
        if not cmd:
            return spec
        if spec.url != BASIC_MEMORY_PYPI + BASIC_MEMORY_VERSION:
            raise ValueError(
                "--basic-memory-cmd starts basic-memory with the given command: use it with "
                "--platform basic-memory (no @VERSION: the command decides the version)"
            )
        return PlatformSpec("basic-memory", basic_memory_url(BASIC_MEMORY_CMD + cmd))

    def provisioner(self, spec: PlatformSpec, provision: Provision) -> Provisioner:
        from benchledger.harness.platforms.provision import BasicMemoryProvisioner

        python = provision.options.get("basic_memory_python", "")
        return BasicMemoryProvisioner(spec, pool_size=provision.pool_size,
                                      root=provision.settings.basic_memory_dir,
                                      python=python)  # fmt: skip


class Mcp(Platform):
    """Any MCP memory server, driven by a mapping file (``mcp:FILE``, or ``mcp:NAME`` for a
    shipped one; docs/platforms.md)."""

    name = "mcp"
    summary = "any MCP memory server, driven by a TOML mapping file (mcp:FILE)"
    kinds = ("mcp",)
    replay = "benchledger.replay.log_generic_mcp:LogGenericMcp"
    options: ClassVar[tuple[PlatformOption, ...]] = (
        PlatformOption(
            "--mcp-python",
            "mcp:FILE: the Python to install the mapped server with (default: the first "
            "found that the mapping's install.python fits)",
            "PATH",
            purpose="names the Python a mapped server is installed with",
        ),
    )

    def usage(self) -> str:
        return "mcp:FILE"

    def parse(self, text: str) -> PlatformSpec | None:
        """``mcp:FILE`` or ``mcp:NAME``; the mapping is loaded and checked now, before anything
        starts (UnusableInput naming the file, the key and the problem)."""
        if not text.startswith("mcp:"):
            return None
        from benchledger.harness.platforms.mcp_mapping import load

        if not text.removeprefix("mcp:"):
            raise ValueError("--platform 'mcp:': name a mapping file or a shipped mapping, "
                             "e.g. mcp:mcp-memory-service")  # fmt: skip
        load(text.removeprefix("mcp:"))
        return PlatformSpec("mcp", text)

    def check_record(self, record: PlatformRecord) -> None:
        """A resume runs the mapping the run recorded: the file must not have changed."""
        from benchledger.harness.platforms.mcp_mapping import load

        now = load(record.url.removeprefix("mcp:")).sha
        if record.mapping_hash and now != record.mapping_hash:
            raise ValueError(
                f"--platform {record.url}: the mapping changed since the run started "
                f"(recorded blake3 {record.mapping_hash[:12]}, now {now[:12]}): restore it, "
                "or start a new run"
            )

    def provisioner(self, spec: PlatformSpec, provision: Provision) -> Provisioner:
        from benchledger.harness.platforms.generic_mcp import GenericMcpProvisioner
        from benchledger.harness.platforms.mcp_mapping import load

        return GenericMcpProvisioner(spec, load(spec.url.removeprefix("mcp:")),
                                     pool_size=provision.pool_size, root=provision.settings.mcp_dir,
                                     python=provision.options.get("mcp_python", ""))  # fmt: skip


EMBEDDED: Final = Embedded()
PROCESS: Final = EmbeddedProcess()
URL: Final = Url()
SERVER_MEMORY: Final = ServerMemory()
BASIC_MEMORY: Final = BasicMemory()
MCP: Final = Mcp()
