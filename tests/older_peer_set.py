"""The peer's protocol set in its older v1.102 schema, built at test time (never committed).

v1.102's Page struct had no Summary field, so its set is today's YAML without the
``summary:`` lines; its Go JSON, and so its peer hash, has no "summary" key.
"""

from __future__ import annotations

import os


def write_v1102_set(peer: str, folder: str) -> str:
    """Copy the peer's bench/protocols YAML into ``folder`` minus every ``summary:`` line."""
    source = os.path.join(peer, "bench", "protocols")
    os.makedirs(folder, exist_ok=True)
    for name in sorted(os.listdir(source)):
        if not name.endswith(".yaml"):
            continue  # the scripted smoke (JSON) is not a protocol
        with open(os.path.join(source, name), encoding="utf-8") as fh:
            lines = [line for line in fh if not line.lstrip().startswith("summary:")]
        with open(os.path.join(folder, name), "w", encoding="utf-8") as fh:
            fh.writelines(lines)
    return folder
