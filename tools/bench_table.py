#!/usr/bin/env python3
"""Markdown tables of foldcheck_bench results: ns per multiply-add and ratios to onednn
and float32, one table per run's JSON (--benchmark_format=json or --benchmark_out), each
headed by the x86-64 level its reference kernels ran at (the context's "isa";
tools/bench_levels.sh writes one run per level the CPU has).

usage: tools/bench_table.py BENCH.json [BENCH.json ...]
"""
import json
import sys

LEVELS = {"v4": "x86-64-v4 (AVX-512)", "v3": "x86-64-v3 (AVX2 + FMA)", "base": "x86-64 baseline (SSE2)"}


def table(data):
    rows = {}
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        shape, entry = b["name"].split("/")[:2]
        rows.setdefault(shape, {})[entry] = b
    ctx = data.get("context", {})
    isa = ctx.get("isa", "?")
    print(f"### Kernels at {LEVELS.get(isa, isa)}\n")
    print(f"One run on {ctx.get('num_cpus', '?')} CPUs, {ctx.get('date', '')}; ns per multiply-add "
          f"(lower is faster); ratios are time per term relative to onednn and to float32.\n")
    print("| shape | entry | ns/term | G terms/s | × onednn | × float32 | notes |")
    print("|---|---|---:|---:|---:|---:|---|")
    for shape, entries in rows.items():
        ns = {e: 1e9 / b["items_per_second"] for e, b in entries.items() if b.get("items_per_second")}
        for e, b in entries.items():
            if e not in ns:
                continue
            note = ""
            if "fallback_fraction" in b:
                note = f"fallbacks {b['fallback_fraction']:.2e}"
                if "compensated_fraction" in b:
                    note += f", second tier {b['compensated_fraction']:.2e}"
            if e == "naive_mp" and "reference" in ns:
                note = f"{ns[e] / ns['reference']:.0f}× reference"
            if e == "accuracy_diff" and "forward_float32" in ns:
                note = f"{ns[e] / ns['forward_float32']:.1f}× forward_float32"
            r1 = f"{ns[e] / ns['onednn']:.1f}" if "onednn" in ns else "-"
            r2 = f"{ns[e] / ns['float32']:.2f}" if "float32" in ns else "-"
            print(f"| {shape} | {e} | {ns[e]:.4g} | {1 / ns[e]:.3g} | {r1} | {r2} | {note} |")
    print()


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    for path in sys.argv[1:]:
        with open(path) as f:
            table(json.load(f))
    return 0


if __name__ == "__main__":
    sys.exit(main())
