"""Settings: pure parsers and plain data below the context (flags, CompileOptions, the fusion-switch and
config files, memory limits, tolerances, the seed, jit_config, the log, the observer hooks)."""
