"""PassContext: what the passes of one compile share besides their CompileOptions, the fusion log they
append their decisions to (FusionLog, one FusionRecord per candidate).

compile_graph opens one PassContext per compile (`with PassContext() as ctx:`), as TVM's PassContext
scopes a build; a pass finds it with `PassContext.current()`, and the compiled graph keeps its log
(`CompiledGraph.log`). The frozen CompileOptions hold options only (graphkernel/settings/options.py).
"""
from __future__ import annotations

import contextvars
from dataclasses import dataclass, field

from graphkernel.settings.jit_config import FusionSwitch


@dataclass
class FusionRecord:
    """One fusion considered: the candidates, the pass, the cost figures, the decision and why; an
    accepted one names the composite(s) holding what it fused, as the compiled graph names them."""
    stage: str
    candidates: tuple[str, ...]
    accepted: bool
    reason: str
    figures: dict = field(default_factory=dict)
    composites: tuple[str, ...] = ()
    earlier: tuple[str, ...] = ()      # names those composites had before a later pass renamed or merged them

    def __str__(self) -> str:
        figs = " ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                        for k, v in sorted(self.figures.items()))
        verdict = "fuse" if self.accepted else "refuse"
        into = f" -> {', '.join(self.composites)}" if self.composites else ""
        return f"[{self.stage}] {verdict} {' + '.join(self.candidates)}{into}: {self.reason}" + (
            f" ({figs})" if figs else "")


class FusionLog(list):
    """A list of FusionRecord, in the order the passes decided. `switch` is the FusionSwitch of the compile
    (the log file's first line: which switch decided)."""

    switch: FusionSwitch | None = None

    def add(self, stage, candidates, accepted, reason, **figures) -> FusionRecord:
        record = FusionRecord(stage, tuple(candidates), accepted, reason, figures)
        self.append(record)
        return record

    def follow(self, renamed: dict) -> None:
        """A pass renamed composites, or merged them into others (composites are numbered per graph):
        `renamed` maps an old name to the names of the composites holding its work now."""
        if not renamed:
            return
        for record in self:
            if record.composites:
                moved = tuple(old for old in record.composites if renamed.get(old, (old,)) != (old,))
                record.earlier = tuple(dict.fromkeys(record.earlier + moved))
                record.composites = tuple(dict.fromkeys(
                    new for old in record.composites for new in renamed.get(old, (old,))))


_current: contextvars.ContextVar = contextvars.ContextVar("graphkernel_pass_context", default=None)


class PassContext:
    """The state one compile's passes share: the fusion log. A pass run outside any context (a tool
    calling a pass by hand) logs into a fresh one that nobody reads."""

    def __init__(self):
        self.log = FusionLog()
        self._tokens: list = []

    def __enter__(self) -> "PassContext":
        self._tokens.append(_current.set(self))
        return self

    def __exit__(self, *exc) -> None:
        _current.reset(self._tokens.pop())

    @staticmethod
    def current() -> "PassContext":
        ctx = _current.get()
        return ctx if ctx is not None else PassContext()
