"""deterministic=1: bitwise-identical results for core_num 1, 7, 32 and NUMBA_NUM_THREADS 1, 2.

Each subprocess runs a parallel-sized LayerNorm (rows variant), a long sum of squares (split variant),
a broadcast elementwise chain and a sum down the columns (columns variant) at every core_num and
prints a hash of the output bits.
"""
import json
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = textwrap.dedent("""
    import hashlib, json
    import numpy as np
    from kernels import DeviceConfig, lower
    from ir import GraphBuilder
    from tests.kernel_graphs import fused, random_array
    from tests.test_kernels_reduce import layer_norm, sum_of_squares

    def chain():
        b = GraphBuilder()
        x, bias = b.input((512, 256)), b.input((256,))
        h = b.op("Add", x, bias)
        return fused(b.graph(b.op("Tanh", b.op("Mul", h, b.op("Mul", h, b.const(0.5))))))

    graphs = {"layer_norm": fused(layer_norm((600, 512))), "sum_of_squares": sum_of_squares((96, 1024)),
              "chain": chain(), "columns": sum_of_squares((64, 8192), (0,))}
    result = {}
    for core_num in (1, 7, 32):
        for label, g in graphs.items():
            # parallel_min_elements=0: every multi-block launch runs in chunks over the pool's threads
            program = lower(g, DeviceConfig(core_num=core_num, deterministic=1, parallel_min_elements=0))
            arrays = [random_array(v.shape, seed=k) for k, v in enumerate(g.inputs)]
            digest = hashlib.sha256(b"".join(o.tobytes() for o in program.run(arrays))).hexdigest()
            result[f"{label}/{core_num}"] = (digest, [k.block_dim for k in program.kernels],
                                             [k.variant for k in program.kernels],
                                             [s.threads > 1 for s in program.steps])
    print(json.dumps(result))
""")


def run(threads: int) -> dict:
    env = {**os.environ, "PYTHONPATH": ROOT, "NUMBA_NUM_THREADS": str(threads)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_bitwise_across_core_num_and_threads():
    results = {threads: run(threads) for threads in (1, 2)}
    for label in ("layer_norm", "sum_of_squares", "chain", "columns"):
        digests = {results[t][f"{label}/{c}"][0] for t in (1, 2) for c in (1, 7, 32)}
        assert len(digests) == 1, f"{label}: {results}"
    one, many = results[2]["layer_norm/1"], results[2]["layer_norm/32"]
    assert one[1] == [1] and many[1][0] > 7 and many[3] == [True]  # many blocks, over the threads
    assert results[2]["sum_of_squares/32"][2] == ["split"]
    assert results[2]["columns/32"][2] == ["columns"] and results[2]["columns/32"][1][0] > 1
