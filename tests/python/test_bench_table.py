"""tools/bench_table.py on synthetic Google Benchmark JSON: rows named without the library's
suffixes (arguments kept, so resnet18/output_bound/8 and /32 stay apart), repetitions shown
as their median, ratios to onednn and float32, a warning on a busy machine, and a clear
error (not a traceback) for a file with no benchmark or no JSON.
"""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "bench_table.py"


def run(tmp_path, data, name="b.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return subprocess.run([sys.executable, str(TOOL), str(path)], capture_output=True, text=True)


def bench(name, ips, **counters):
    return {"name": name, "run_type": "iteration", "items_per_second": ips, **counters}


def test_rows_ratios_arguments_and_repetitions(tmp_path):
    data = {
        "context": {"isa": "v3", "num_cpus": 2, "date": "d", "load_avg": [0.1, 0.1, 0.1]},
        "benchmarks": [
            bench("conv3x3_64/onednn/min_time:0.500/real_time", 100e9),
            bench("conv3x3_64/float32/real_time", 50e9),
            bench("conv3x3_64/reference/min_time:0.500/real_time", 20e9, fallback_fraction=0.0),
            bench("conv3x3_64/reference/min_time:0.500/real_time", 30e9, fallback_fraction=0.0),
            bench("conv3x3_64/reference/min_time:0.500/real_time", 25e9, fallback_fraction=0.0),
            bench("resnet18/output_bound/8/iterations:1/real_time", 7e9, median_bound_ulp=28e3, sqrt_c=10.06),
            bench("resnet18/output_bound/32/iterations:1/real_time", 8e9, median_bound_ulp=7.7e3, sqrt_c=2.37),
        ],
    }
    r = run(tmp_path, data)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "### Kernels at x86-64-v3 (AVX2 + FMA)" in out
    assert "Warning" not in out
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): line for line in out.splitlines() if line.startswith("| ")}
    # The median of 20, 30, 25 G/s is 25: 4.0x onednn's time per term, 2.00x float32's.
    ref = rows[("conv3x3_64", "reference")]
    assert "| 25 | 4.0 | 2.00 |" in ref and "median of 3 runs" in ref
    assert ("resnet18", "output_bound/8") in rows and ("resnet18", "output_bound/32") in rows
    assert "median bound 7700 ULP, sqrt(c) 2.37" in rows[("resnet18", "output_bound/32")]


def test_busy_machine_is_flagged(tmp_path):
    data = {"context": {"isa": "v4", "num_cpus": 2, "load_avg": [1.8, 1.0, 0.5]},
            "benchmarks": [bench("conv1x1_256/float32/real_time", 30e9)]}
    r = run(tmp_path, data)
    assert r.returncode == 0 and "**Warning:** the machine was busy" in r.stdout


def test_no_benchmark_and_not_json_are_clear_errors(tmp_path):
    r = run(tmp_path, {"context": {}, "benchmarks": []})
    assert r.returncode == 1 and "no benchmark ran" in r.stderr and "Traceback" not in r.stderr
    r = run(tmp_path, "{not json", name="bad.json")
    assert r.returncode == 2 and "not a benchmark JSON" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, str(TOOL), "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "usage" in r.stdout
