"""`graphkernel bench`: step-time benchmarks of fusion on against off.

    workloads.py     the fusion example's nets, W1..W6, the BERT layer (bert.py) and their ONNX forms (onnx_models.py)
    harness.py       one workload: reference, compile, verify, memory, interleaved timing, profile
    timing.py        medians and IQR of interleaved rounds, per-kernel profiles, copy bandwidth, progress
    peers.py         jax.jit and ONNX Runtime on the same computation (optional imports)
    report.py        JSON, the markdown table the docs quote, a PNG chart
    cli.py           the `graphkernel bench` subcommand
"""
