"""Observation: what looks at a compiled graph or a run (a run's launches, stage dumps, data dump, overflow
check, profiler, compile progress, the compile record, the HTML report, the Chrome trace)."""
