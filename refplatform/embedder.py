"""Embedders behind one interface: a deterministic lexical default, wordllama's static
embeddings shipped in its wheel (offline), and Ollama over httpx2.

The lexical embedder is what makes supersede reproducible without a model. A text
becomes a sparse bag of weighted terms:

- lower-cased words of letters and digits; thousands separators joined (``1,200`` ->
  ``1200``); a trailing plural ``s`` dropped from words longer than three letters;
  English stop words dropped;
- words inside single or double quotes -- the term a definition defines, such as
  ``'anchor region'`` -- weigh ``QUOTED_WEIGHT`` (4), every other word 1, repeated
  words add up;
- the vector is L2-normalised, and cosine similarity is the dot product.

So a restatement of a definition that changes its value ("... is North." -> "... is
South.") keeps the heavy defined term and scores >= 0.90 (it supersedes), while a
different definition on the same entity shares only light words and scores < 0.75.

``wordllama`` (the optional extra of that name) is semantic and still local: the
package's wheel ships 256-dimensional static token embeddings and their tokenizer. Its
default ``WordLlama.load()`` looks for a ``tokenizer/`` folder while the wheel ships
``tokenizers/`` and then tries to download; loading from the package's own folder with
downloads disabled reads the shipped files and never touches the network.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import httpx2

from benchledger.refplatform.errors import EmbedderError

QUOTED_WEIGHT: Final = 4.0
STOP_WORDS: Final = frozenset(
    "a an and are as at be by for from has have in is it its of on or our that the this "
    "to was were which with we you your i my me now not".split()
)
_QUOTED = re.compile(r"(?<![\w])['\"‘“]([^'\"‘’“”]{2,80})['\"’”](?![\w])")
_WORD = re.compile(r"[0-9a-z]+")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")

Vector = Mapping[str, float] | Sequence[float]


class Embedder(Protocol):
    """Turns text into a vector; ``cosine`` compares two of its vectors."""

    name: str

    def embed(self, text: str) -> Vector: ...


def _words(text: str) -> list[str]:
    out = []
    for w in _WORD.findall(_THOUSANDS.sub("", text.lower())):
        if w in STOP_WORDS:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss") and not w.isdigit():
            w = w[:-1]
        out.append(w)
    return out


class LexicalEmbedder:
    """Deterministic weighted bag of words (see the module docstring)."""

    name = "lexical"

    def embed(self, text: str) -> dict[str, float]:
        weights: dict[str, float] = {}
        for phrase in _QUOTED.findall(text):
            for w in _words(phrase):
                weights[w] = weights.get(w, 0.0) + QUOTED_WEIGHT - 1.0
        for w in _words(text):
            weights[w] = weights.get(w, 0.0) + 1.0
        norm = math.sqrt(sum(v * v for v in weights.values()))
        return {k: v / norm for k, v in weights.items()} if norm else {}


WORDLLAMA_DIM: Final = 256
WORDLLAMA_MISSING: Final = (
    "embedder 'wordllama' needs the wordllama package: pip install 'benchledger[wordllama]'"
)


class WordLlamaEmbedder:
    """wordllama's 256-dimensional static embeddings, loaded from the files its wheel ships
    with downloads disabled (see the module docstring); ImportError when not installed."""

    name = "wordllama"

    def __init__(self) -> None:
        # Imported here: only a platform that asks for it pays for numpy-backed loading.
        # wordllama configures the root logger as it loads (an INFO handler on stderr):
        # what this process logs, and where, stays the process's own.
        root = logging.getLogger()
        level, handlers = root.level, list(root.handlers)
        try:
            import wordllama
        finally:
            root.setLevel(level)
            root.handlers[:] = handlers

        folder = os.path.dirname(os.path.abspath(wordllama.__file__))
        self._model: Any = wordllama.WordLlama.load(
            cache_dir=folder, disable_download=True, dim=WORDLLAMA_DIM
        )

    def embed(self, text: str) -> list[float]:
        return [float(x) for x in self._model.embed([text])[0]]


class OllamaEmbedder:
    """Embeddings from an Ollama server's ``POST /api/embeddings`` over an httpx2 client."""

    def __init__(self, model: str, base_url: str, client: httpx2.Client | None = None) -> None:
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.name = f"ollama:{model}"
        self._client = client or httpx2.Client(timeout=30.0)

    def embed(self, text: str) -> list[float]:
        url = f"{self.base_url}/api/embeddings"
        try:
            response = self._client.post(url, json={"model": self.model, "prompt": text})
        except httpx2.HTTPError as exc:
            raise EmbedderError(f"ollama at {self.base_url} unreachable: {exc}") from None
        if response.status_code != 200:
            raise EmbedderError(
                f"ollama at {self.base_url} answered {response.status_code}: {response.text[:200]}"
            )
        try:
            vector = response.json()["embedding"]
            values = [float(x) for x in vector]
        except (ValueError, KeyError, TypeError):
            raise EmbedderError(f"ollama at {self.base_url} sent no embedding list") from None
        if not values:
            raise EmbedderError(f"ollama model {self.model!r} returned an empty embedding")
        return values


def cosine(a: Vector, b: Vector) -> float:
    """Cosine similarity of two vectors from the same embedder (sparse or dense)."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        small, large = (a, b) if len(a) <= len(b) else (b, a)
        return sum(v * large.get(k, 0.0) for k, v in small.items())
    if isinstance(a, Mapping) or isinstance(b, Mapping) or len(a) != len(b):
        return 0.0
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def parse_spec(spec: str, client: httpx2.Client | None = None) -> Embedder:
    """``lexical``, ``wordllama`` or ``ollama:MODEL@URL`` -> an embedder; ValueError names
    what is wrong (wordllama not installed among it)."""
    if spec == "lexical":
        return LexicalEmbedder()
    if spec == "wordllama":
        try:
            return WordLlamaEmbedder()
        except ImportError:
            raise ValueError(WORDLLAMA_MISSING) from None
    if spec.startswith("ollama:") and "@" in spec:
        model, _, url = spec.removeprefix("ollama:").partition("@")
        if model and url.startswith(("http://", "https://")):
            return OllamaEmbedder(model, url, client)
    raise ValueError(
        f"embedder {spec!r}: expected 'lexical', 'wordllama' or 'ollama:MODEL@http://HOST:PORT'"
    )
