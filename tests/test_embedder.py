"""Embedders: the lexical default's thresholds, and Ollama against a local fake server."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import math

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from benchledger import protocols
from benchledger.refplatform.embedder import LexicalEmbedder, OllamaEmbedder, cosine, parse_spec
from benchledger.refplatform.errors import EmbedderError
from benchledger.refplatform.platform import SIMILAR_AT, SUPERSEDE_AT, Platform
from benchledger.refplatform.server import LoopbackServer, RunningPlatform
from tests.platform_helpers import capture, client_for

LEX = LexicalEmbedder()


def sim(a: str, b: str) -> float:
    return cosine(LEX.embed(a), LEX.embed(b))


def test_every_committed_update_restates_its_fact_closely_enough_to_supersede():
    updates = [p for p in protocols.load(protocols.LIFECYCLE_DIR).protocols if p.update]
    scores = {p.id: sim(p.fact, p.update.fact) for p in updates}
    assert len(scores) == 10
    assert min(scores.values()) >= SUPERSEDE_AT, scores


def test_unrelated_facts_on_one_entity_stay_below_the_similar_threshold():
    pset = protocols.load(protocols.LIFECYCLE_DIR).protocols
    worst = 0.0
    for a, b in itertools.combinations(pset, 2):
        if a.entity_urn != b.entity_urn:
            continue
        for fa in [a.fact] + ([a.update.fact] if a.update else []):
            for fb in [b.fact] + ([b.update.fact] if b.update else []):
                worst = max(worst, sim(fa, fb))
    assert worst < SIMILAR_AT, worst


@pytest.mark.parametrize(
    ("a", "b", "low", "high"),
    [
        ("The 'anchor region' is North.", "The 'anchor region' is North.", 0.999, 1.001),
        ("An order of 1,200 USD", "an order of 1200 usd", 0.999, 1.001),
        ("Completed orders", "completed order", 0.999, 1.001),
        ("The 'anchor region' is North.", "Revenue is in cents.", 0.0, 0.01),
        ("", "anything", 0.0, 0.0),
    ],
    ids=["identical", "thousands-separator", "plural", "unrelated", "empty"],
)
def test_lexical_similarity_cases(a, b, low, high):
    assert low <= sim(a, b) <= high


def _fake_vector(text: str) -> list[float]:
    """A deterministic dense vector: hashed word counts, 64 dimensions."""
    vec = [0.0] * 64
    for word in text.lower().split():
        vec[hashlib.sha256(word.encode()).digest()[0] % 64] += 1.0
    return vec


@pytest.fixture
def fake_ollama():
    seen: list[dict] = []

    async def embeddings(request: Request) -> JSONResponse:
        body = await request.json()
        seen.append(body)
        if body.get("model") == "broken":
            return JSONResponse({"error": "model not loaded"}, status_code=500)
        if body.get("model") == "empty":
            return JSONResponse({"embedding": []})
        return JSONResponse({"embedding": _fake_vector(body["prompt"])})

    server = LoopbackServer(
        Starlette(routes=[Route("/api/embeddings", embeddings, methods=["POST"])])
    )
    server.start()
    yield server.url, seen
    server.stop()


def test_ollama_embedder_posts_model_and_prompt(fake_ollama):
    url, seen = fake_ollama
    emb = parse_spec(f"ollama:nomic-embed-text@{url}")
    assert isinstance(emb, OllamaEmbedder) and emb.name == "ollama:nomic-embed-text"
    vec = emb.embed("the anchor region is north")
    assert seen == [{"model": "nomic-embed-text", "prompt": "the anchor region is north"}]
    assert vec == _fake_vector("the anchor region is north")
    assert math.isclose(cosine(vec, emb.embed("the anchor region is north")), 1.0)


@pytest.mark.parametrize(
    ("model", "message"),
    [("broken", "answered 500"), ("empty", "empty embedding")],
    ids=["5xx", "empty"],
)
def test_ollama_failures_are_embedder_errors(fake_ollama, model, message):
    url, _ = fake_ollama
    with pytest.raises(EmbedderError, match=message):
        OllamaEmbedder(model, url).embed("text")


def test_an_unreachable_ollama_is_an_embedder_error():
    with pytest.raises(EmbedderError, match="unreachable"):
        OllamaEmbedder("m", "http://127.0.0.1:9", httpx2.Client(timeout=2)).embed("text")


@pytest.mark.parametrize(
    "spec", ["ollama:", "ollama:m@ftp://x", "word2vec"], ids=["no-model", "bad-url", "unknown"]
)
def test_bad_embedder_specs_are_refused(spec):
    with pytest.raises(ValueError, match="expected 'lexical'"):
        parse_spec(spec)


def test_the_platform_supersedes_with_the_ollama_embedder(fake_ollama):
    url, _ = fake_ollama

    async def go(r):
        client = client_for(r)
        first = await capture(client, 1, "the focus region for this study is north")
        second = await capture(client, 1, "the focus region for this study is north indeed")
        return first, second

    with RunningPlatform(Platform(embedder=parse_spec(f"ollama:m@{url}")), pool_size=2) as r:
        first, second = asyncio.run(go(r))
    assert second["superseded_ids"] == [first["id"]]


def test_a_failing_embedder_still_captures_and_supersedes_nothing(fake_ollama):
    """As the peer's capture does: embedding is best effort, recall-first is skipped."""
    url, _ = fake_ollama

    async def go(r):
        client = client_for(r)
        await capture(client, 1, "the focus region for this study is north")
        second = await capture(client, 1, "the focus region for this study is north indeed")
        listed = await client.rest("GET", "/api/v1/admin/knowledge/insights")
        return second, listed

    with RunningPlatform(Platform(embedder=OllamaEmbedder("broken", url)), pool_size=2) as r:
        second, listed = asyncio.run(go(r))
    assert "superseded" not in second and listed.body["total"] == 2
