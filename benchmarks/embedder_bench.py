"""``benchledger bench embedder``: an embedder's load time, embedding throughput and
latency, and its cosine cost, beside the lexical embedder's in the same process.

The texts are the committed lifecycle suite's titles, facts and corrections, cycled to
``texts`` items: what refplatform embeds on capture and search. Each embedder embeds
every text once, one call per text (as the platform calls it); the cosine figure is one
comparison of two of its vectors, which a search makes per record.
"""

from __future__ import annotations

import json
import statistics
import time
from itertools import cycle, islice, pairwise

from benchledger import protocols
from benchledger.refplatform.embedder import Embedder, cosine, parse_spec


def _texts(count: int) -> list[str]:
    found: list[str] = []
    for p in protocols.load(protocols.LIFECYCLE_DIR).protocols:
        found += [p.title, p.fact]
        if p.update:
            found += [p.update.prompt, p.update.fact]
    return list(islice(cycle(found), count))


def _measure(spec: str, texts: list[str]) -> dict[str, float | str]:
    started = time.perf_counter()
    embedder: Embedder = parse_spec(spec)
    load_s = time.perf_counter() - started
    latencies = []
    vectors = []
    for text in texts:
        t0 = time.perf_counter()
        vectors.append(embedder.embed(text))
        latencies.append(time.perf_counter() - t0)
    total = sum(latencies)
    pairs = list(pairwise(vectors))
    t0 = time.perf_counter()
    for a, b in pairs:
        cosine(a, b)
    cos_s = (time.perf_counter() - t0) / max(len(pairs), 1)
    latencies.sort()
    return {
        "embedder": embedder.name,
        "load_s": round(load_s, 4),
        "texts_per_s": round(len(texts) / total, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 4),
        "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))] * 1000, 4),
        "cosine_us": round(cos_s * 1e6, 2),
    }


def run_bench(*, spec: str, texts: int, as_json: bool) -> int:
    """Measure lexical, then ``spec``, on the same texts; print both and the ratios."""
    items = _texts(texts)
    base = _measure("lexical", items)
    other = _measure(spec, items)
    ratio = {
        "throughput_vs_lexical": round(float(other["texts_per_s"]) / float(base["texts_per_s"]), 3),
        "cosine_vs_lexical": round(float(other["cosine_us"]) / float(base["cosine_us"]), 2),
    }
    if as_json:
        print(json.dumps({"texts": len(items), "lexical": base, spec: other, **ratio}))
        return 0
    print(f"{len(items)} texts from the committed lifecycle suite, one embed call each")
    for row in (base, other):
        print(
            f"  {row['embedder']:<12} load {row['load_s']:.3f} s  {row['texts_per_s']:>9.1f} "
            f"texts/s  p50 {row['p50_ms']:.3f} ms  p99 {row['p99_ms']:.3f} ms  "
            f"cosine {row['cosine_us']:.2f} us"
        )
    print(
        f"{other['embedder']} vs lexical: {ratio['throughput_vs_lexical']:.3f}x the throughput, "
        f"{ratio['cosine_vs_lexical']:.2f}x the cosine cost"
    )
    return 0
