"""Tracing: symbolic values recorded into the IR (the trace, the tape of Parameter writes, tensor `if`
branching, Python values as graph arguments)."""
