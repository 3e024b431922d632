#!/usr/bin/env python3
"""Markdown tables of foldcheck_bench results: ns per multiply-add and ratios to onednn
and float32, one table per run's JSON (--benchmark_format=json or --benchmark_out), each
headed by the x86-64 level its reference kernels ran at (the context's "isa";
tools/bench_levels.sh writes one run per level the CPU has) and the machine's load when the
run began (timings on a loaded machine are not worth comparing: a warning says so).

Rows are named by the benchmark's name without Google Benchmark's suffixes (min_time:...,
iterations:..., real_time), so an argument stays (resnet18/output_bound/32); a benchmark
run several times (--benchmark_repetitions) shows the median of its runs.

usage: tools/bench_table.py BENCH.json [BENCH.json ...]
"""
import argparse
import json
import statistics
import sys

LEVELS = {"v4": "x86-64-v4 (AVX-512)", "v3": "x86-64-v3 (AVX2 + FMA)", "base": "x86-64 baseline (SSE2)"}
BUSY = 0.5  # load average per CPU above which the header warns


def row_name(name):
    parts = [p for p in name.split("/") if ":" not in p and p != "real_time"]
    return parts[0], "/".join(parts[1:])


def collect(data):
    """{shape: {entry: [runs]}} in the order the benchmarks ran."""
    rows: dict[str, dict[str, list[dict]]] = {}
    for b in data.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration" or not b.get("items_per_second"):
            continue
        shape, entry = row_name(b["name"])
        rows.setdefault(shape, {}).setdefault(entry, []).append(b)
    return rows


def note_for(entry, runs, ns):
    b = runs[-1]
    note = []
    if "fallback_fraction" in b:
        note.append(f"fallbacks {b['fallback_fraction']:.2e}")
        if "compensated_fraction" in b:
            note.append(f"second tier {b['compensated_fraction']:.2e}")
    if "median_bound_ulp" in b:
        note.append(f"median bound {b['median_bound_ulp']:.4g} ULP, sqrt(c) {b['sqrt_c']:.3g}")
    if entry == "naive_mp" and "reference" in ns:
        note.append(f"{ns[entry] / ns['reference']:.0f}× reference")
    if entry == "accuracy_diff" and "forward_float32" in ns:
        note.append(f"{ns[entry] / ns['forward_float32']:.1f}× forward_float32")
    if len(runs) > 1:
        note.append(f"median of {len(runs)} runs")
    return ", ".join(note)


def header(ctx):
    isa = ctx.get("isa", "?")
    cpus = ctx.get("num_cpus", "?")
    load = ctx.get("load_avg") or []
    print(f"### Kernels at {LEVELS.get(isa, isa)}\n")
    load_text = f", 1-minute load average {load[0]:.2f} as it began" if load else ""
    print(f"One run on {cpus} CPUs, {ctx.get('date', '')}{load_text}; ns per multiply-add "
          f"(lower is faster); ratios are time per term relative to onednn and to float32.\n")
    if load and isinstance(cpus, int) and load[0] > BUSY * cpus:
        print(f"**Warning:** the machine was busy (1-minute load average {load[0]:.2f} on {cpus} CPUs as "
              f"the run began): these timings may not be comparable with an idle run.\n")


def table(data):
    rows = collect(data)
    if not rows:
        return False
    header(data.get("context", {}))
    print("| shape | entry | ns/term | G terms/s | × onednn | × float32 | notes |")
    print("|---|---|---:|---:|---:|---:|---|")
    for shape, entries in rows.items():
        ns = {e: 1e9 / statistics.median(b["items_per_second"] for b in runs) for e, runs in entries.items()}
        for e, runs in entries.items():
            r1 = f"{ns[e] / ns['onednn']:.1f}" if "onednn" in ns else "-"
            r2 = f"{ns[e] / ns['float32']:.2f}" if "float32" in ns else "-"
            print(f"| {shape} | {e} | {ns[e]:.4g} | {1 / ns[e]:.3g} | {r1} | {r2} | {note_for(e, runs, ns)} |")
    print()
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", nargs="+",
                    help="foldcheck_bench JSON output (--benchmark_out=FILE --benchmark_out_format=json)")
    a = ap.parse_args()
    status = 0
    for path in a.json:
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError) as e:
            print(f"bench_table.py: {path}: not a benchmark JSON: {e}", file=sys.stderr)
            return 2
        if not table(data):
            print(f"bench_table.py: {path}: no benchmark ran (a --benchmark_filter that matches no name? "
                  f"names end in /real_time: end a filter with '/', not '$')", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
