"""Tools: the command line, the demo, the debugging compare, the ONNX runner, the generated op table and
the benchmarks."""
