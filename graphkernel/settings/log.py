"""MindSpore's `mindspore.log` (`from graphkernel import log as logger`): `logger.info(...)`,
`warning`, `error`, `debug`, `critical`, `exception`, `get_level()`, on the standard `logging` logger
named "graphkernel". The level comes from GLOG_v as MindSpore reads it (0 debug, 1 info, 2 warning, the
default, 3 error, 4 critical)."""
from __future__ import annotations

import logging
import os

_LEVELS = {"0": logging.DEBUG, "1": logging.INFO, "2": logging.WARNING, "3": logging.ERROR, "4": logging.CRITICAL}

_logger = logging.getLogger("graphkernel")
_logger.setLevel(_LEVELS.get(os.environ.get("GLOG_v", "2"), logging.WARNING))

debug = _logger.debug
info = _logger.info
warning = _logger.warning
error = _logger.error
critical = _logger.critical
exception = _logger.exception


def get_level() -> str:
    """The level as MindSpore names it: '0' (debug) to '4' (critical)."""
    return next((k for k, v in _LEVELS.items() if v == _logger.level), "2")


__all__ = ["debug", "info", "warning", "error", "critical", "exception", "get_level"]
