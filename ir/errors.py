"""Exceptions of the IR. Every error a user can cause derives from GraphKernelError."""


class GraphKernelError(Exception):
    """Base of every error graphkernel raises on purpose."""


class IRError(GraphKernelError):
    """A node or graph breaks a rule of the IR."""


class ShapeError(IRError, ValueError):
    """Operand shapes do not fit the op's rule."""


class DTypeError(IRError, TypeError):
    """Operand dtypes do not fit the op's rule, or a dtype is not supported."""


class AttrError(IRError, ValueError):
    """An op attribute is missing, unknown or has a bad value."""


class UnknownOpError(IRError, KeyError):
    """No op of that name is registered."""

    def __str__(self) -> str:  # KeyError quotes its message; we want it plain
        return str(self.args[0]) if self.args else ""


class VerifyError(IRError):
    """verify() found a malformed graph."""


class ParseError(IRError):
    """IR text that does not parse; carries the line and column."""

    def __init__(self, message: str, line: int, col: int):
        super().__init__(f"line {line}, column {col}: {message}")
        self.line, self.col = line, col


class ExecutionError(IRError):
    """A node failed while the reference interpreter ran it (the original error is chained)."""
