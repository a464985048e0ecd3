"""`graphkernel bench`: step-time benchmarks of fusion on against off.

    workloads.py     the fusion example's nets, W1..W6, the BERT layer (bert.py) and their ONNX forms (onnx_models.py)
    harness.py       one workload: reference, compile, verify, memory, interleaved timing, profile
    timing.py        medians and IQR of interleaved rounds, per-kernel profiles, copy bandwidth, progress
    peers.py         jax.jit and ONNX Runtime on the same computation (optional imports)
    outputs.py       the results written: JSON, the markdown table the docs quote, a PNG chart
    command.py       the `graphkernel bench` subcommand: run the workloads, write the outputs
    train_bench.py   `bench --train`: the BERT-large training step, each implementation in its own process
    train_model.py   its networks (encoder stack, full BERT-large), weights and inputs, as Cells
    train_worker.py  the worker process serving one implementation's steps over a pipe
    train_peers.py   torch eager, torch.compile and jax.jit on the same step (optional imports)
    train_outputs.py its JSON, markdown note with the targets, PNG chart
"""
