"""runcore's stream decoders against the official SDKs' stream accumulators, on the same bytes,
in one run: every recorded streamed body of `providers/tests/fixtures/*.jsonl` (status 200,
SSE), decoded to its final answer by

- runcore: `runcore.providers.<api>.Decoder(...)`, `feed(body)` in 512-byte chunks (as a socket
  delivers it), then `finish()`, every input a Python dict;
- the SDK: `anthropic`'s `MessageStream(...).get_final_message()`, `openai`'s
  `ChatCompletionStreamState` over `Stream[ChatCompletionChunk]` and
  `ResponseStream(...).get_final_response()`, each over a fake HTTP response holding the same
  bytes (offline, nothing sent).

    python bindings/python/benches/decode_vs_sdk.py [--repeat 5] [--chunk 512]

Needs the package (`pip install ./bindings/python`, release) and `pip install anthropic openai`.
Prints one JSON line per API: bodies, bytes, the best of --repeat passes over all bodies for
each side (ms), and the speed-up (SDK / runcore). Bodies the SDK refuses (see the differential
test's KNOWN list) are timed on runcore's side only and counted apart.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Callable, List

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from sdk_streams import DECODERS, sdk_final  # noqa: E402

FIXTURES = HERE.parents[2] / "providers" / "tests" / "fixtures"
APIS = ["anthropic", "openai-chat", "openai-responses"]


def bodies(api: str) -> List[bytes]:
    with open(FIXTURES / f"{api}.jsonl") as f:
        exchanges = [json.loads(line) for line in f]
    return [e["response"].encode() for e in exchanges
            if e["status"] == 200 and e["content_type"].startswith("text/event-stream")]


def best(repeat: int, run: Callable[[], Any]) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--chunk", type=int, default=512)
    args = parser.parse_args()
    chunk = args.chunk
    for api in APIS:
        all_bodies = bodies(api)
        accepted = []
        for body in all_bodies:
            try:
                sdk_final(api, body)
                accepted.append(body)
            except Exception:  # noqa: BLE001 - refused by the SDK: timed on our side only
                pass
        Decoder = DECODERS[api]

        def ours() -> None:
            for body in accepted:
                decoder = Decoder("r", 1)
                for i in range(0, len(body), chunk):
                    decoder.feed(body[i:i + chunk])
                decoder.finish()

        def theirs() -> None:
            for body in accepted:
                sdk_final(api, body)

        ours()
        theirs()  # warm both (imports, caches)
        ours_s = best(args.repeat, ours)
        theirs_s = best(args.repeat, theirs)
        print(json.dumps({
            "api": api,
            "bodies": len(accepted),
            "refused_by_sdk": len(all_bodies) - len(accepted),
            "bytes": sum(len(b) for b in accepted),
            "runcore_ms": round(ours_s * 1000, 3),
            "sdk_ms": round(theirs_s * 1000, 3),
            "speedup": round(theirs_s / ours_s, 1),
        }), flush=True)


if __name__ == "__main__":
    main()
