"""Fuzz run (issue 6, item 4): the hostile-input properties of
``tests/unit/test_hostile_input.py`` with many more examples.

Same strategies and checks as the tests (manifests through load_manifests and
admit; POST/PUT/PATCH bodies, paths and query strings through the real HTTP
server), ``--examples`` per property (default 5000). ``--seed N`` fixes the
examples (default: a random seed, printed, so a failure can be replayed).
Prints, per property, how many inputs ran and what became of them; exit 1 on
the first property that fails (hypothesis prints the shrunk input).

    .venv/bin/python benchmarks/fuzz_api.py [--examples 5000] [--seed 1] [--only http_patch]
"""
from __future__ import annotations

import argparse
import collections
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from tests.unit import test_hostile_input as T


def properties(server: T.ApiServer) -> dict[str, tuple[Any, Callable[[Any], Any]]]:
    """name -> (strategy, check returning an outcome label)."""
    def admitted(case: tuple) -> str:
        T.check_admit(*case)
        return "checked"

    def unknown(case: tuple) -> str:
        obj, path, key = case
        T.check_admit(obj, path + (key,), key)
        return "checked"

    def manifest(text: Any) -> str:
        T.check_manifest(text)
        return "checked"

    def bodies(case: tuple) -> str:
        method, path, body, ctype, mutated = case
        if mutated is not None and method == "PUT" and mutated[:2] == ("metadata", "name"):
            mutated = None
        return f"HTTP {T.check_response(server, method, path, body, ctype, mutated)[0]}"

    def patches(case: tuple) -> str:
        path, body, ctype = case
        return f"HTTP {T.check_response(server, 'PATCH', path, body, ctype)[0]}"

    def paths(case: tuple) -> str:
        method, path, body, params = case
        ctype = "application/merge-patch+json" if method == "PATCH" else "application/json"
        return f"HTTP {T.check_response(server, method, path, body, ctype, params=params)[0]}"

    return {
        "admit": (T.mutated_jobs(), admitted),
        "unknown_fields": (T.jobs_with_unknown_field(), unknown),
        "manifest_text": (T.manifest_texts(), manifest),
        "arbitrary_text": (st.one_of(st.text(max_size=300), st.binary(max_size=300)), manifest),
        "http_bodies": (T.object_requests(), bodies),
        "http_patch": (T.patch_requests(), patches),
        "http_paths": (T.path_requests(), paths),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=int, default=5000, help="inputs per property")
    p.add_argument("--seed", type=int, default=None, help="fix the examples (default: random, printed)")
    p.add_argument("--only", action="append", help="run only this property (repeatable)")
    args = p.parse_args()
    run_seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed {run_seed}, {args.examples} examples per property")
    server = T.ApiServer()
    total = 0
    try:
        for name, (strategy, check) in properties(server).items():
            if args.only and name not in args.only:
                continue
            outcomes: collections.Counter[str] = collections.Counter()

            @seed(run_seed)
            @settings(max_examples=args.examples, deadline=None, database=None,
                      suppress_health_check=list(HealthCheck))
            @given(strategy)
            def prop(case: Any) -> None:
                outcomes[check(case)] += 1

            t0 = time.perf_counter()
            try:
                prop()
            except Exception:
                print(f"{name}: FAILED after {sum(outcomes.values())} inputs (seed {run_seed})")
                raise
            n = sum(outcomes.values())
            total += n
            shown = ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
            print(f"{name:<16} {n:>7} inputs in {time.perf_counter() - t0:6.1f}s  ({shown})", flush=True)
    finally:
        server.close()
    print(f"total            {total:>7} inputs, all properties held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
