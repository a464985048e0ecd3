"""ModelCheckpoint: save the train network's Parameters (and the optimizer's state) during Model.train.

    CheckpointConfig(save_checkpoint_steps=1, save_checkpoint_seconds=0, keep_checkpoint_max=5,
                     append_info=None, format="ckpt")
    ModelCheckpoint(prefix="CKP", directory=None, config=None)

Files are `<prefix>-<epoch>_<step in epoch>.<format>`, written by graphkernel.save_checkpoint (a
safetensors file, atomically, whatever the extension), every save_checkpoint_steps steps (or, with
steps 0, every save_checkpoint_seconds seconds) and once more at the end of training. At most
keep_checkpoint_max files of this callback are kept, the oldest removed first (0: all kept). When
files of the same prefix are already in the directory, the prefix becomes `<prefix>_1`, `<prefix>_2`...
(MindSpore's rule), so a second run never overwrites the first. In a data-parallel job of more than
one rank each rank writes into its own folder, `<directory>/rank_<r>/` (MindSpore's layout for a
distributed job's checkpoints): two ranks never write one file, nor race for a prefix. append_info: a list of "epoch_num",
"step_num" and dicts of extra values saved beside the Parameters. `latest_ckpt_file_name` names the
last file written.
"""
from __future__ import annotations

import os
import time

from graphkernel.checkpoint import save_checkpoint
from graphkernel.communication.management import GlobalComm, get_group_size, get_rank
from graphkernel.train.callback.base import Callback, CallbackError


class CheckpointConfig:
    def __init__(self, save_checkpoint_steps=1, save_checkpoint_seconds=0, keep_checkpoint_max=5,
                 append_info=None, format="ckpt"):
        for name, value in (("save_checkpoint_steps", save_checkpoint_steps),
                            ("save_checkpoint_seconds", save_checkpoint_seconds),
                            ("keep_checkpoint_max", keep_checkpoint_max)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise CallbackError(f"CheckpointConfig: {name} must be a non-negative int, got {value!r}")
        if not save_checkpoint_steps and not save_checkpoint_seconds:
            raise CallbackError("CheckpointConfig: save_checkpoint_steps and save_checkpoint_seconds cannot both "
                                "be 0 or None")
        if format not in ("ckpt", "safetensors"):
            raise CallbackError(f"CheckpointConfig: format must be 'ckpt' or 'safetensors', got {format!r}")
        self.save_checkpoint_steps = save_checkpoint_steps or 0
        self.save_checkpoint_seconds = 0 if self.save_checkpoint_steps else save_checkpoint_seconds
        self.keep_checkpoint_max = keep_checkpoint_max or 0
        self.format = format
        self.append_dict = {}
        for item in append_info or ():
            if item in ("epoch_num", "step_num"):
                self.append_dict[item] = 0
            elif isinstance(item, dict):
                self.append_dict.update(item)
            else:
                raise CallbackError(f"CheckpointConfig: append_info holds 'epoch_num', 'step_num' or dicts, got "
                                    f"{item!r}")


class ModelCheckpoint(Callback):
    def __init__(self, prefix="CKP", directory=None, config=None):
        if not isinstance(prefix, str) or not prefix or "/" in prefix or os.sep in prefix:
            raise CallbackError(f"ModelCheckpoint: prefix must be a file name part without '/', got {prefix!r}")
        if config is not None and not isinstance(config, CheckpointConfig):
            raise CallbackError(f"ModelCheckpoint: config must be a CheckpointConfig, got {type(config).__name__}")
        self._config = config or CheckpointConfig()
        self._directory = os.path.abspath(os.fspath(directory)) if directory is not None else os.getcwd()
        if os.path.exists(self._directory) and not os.path.isdir(self._directory):
            raise CallbackError(f"ModelCheckpoint: directory {self._directory!r} is a file")
        if GlobalComm.INITED and get_group_size() > 1:   # one folder per rank: never one file for two ranks
            self._directory = os.path.join(self._directory, f"rank_{get_rank()}")
        os.makedirs(self._directory, exist_ok=True)
        self._prefix = self._free_prefix(prefix)
        self._files: list[str] = []
        self._last_triggered_step = 0
        self._last_time = time.time()
        self.latest_ckpt_file_name = ""

    def _free_prefix(self, prefix: str) -> str:
        taken = lambda p: any(f.startswith(p + "-") for f in os.listdir(self._directory))  # noqa: E731
        n, candidate = 0, prefix
        while taken(candidate):
            n += 1
            candidate = f"{prefix}_{n}"
        return candidate

    def step_end(self, run_context):
        self._save(run_context.original_args(), force=False)

    def end(self, run_context):
        self._save(run_context.original_args(), force=True)

    def _due(self, cb_params, force: bool) -> bool:
        if force:
            return True
        if self._config.save_checkpoint_steps:
            return cb_params.cur_step_num >= self._last_triggered_step + self._config.save_checkpoint_steps
        if time.time() - self._last_time > self._config.save_checkpoint_seconds:
            self._last_time = time.time()
            return True
        return False

    def _save(self, cb_params, force: bool) -> None:
        if cb_params.cur_step_num == self._last_triggered_step or not self._due(cb_params, force):
            return
        step_in_epoch = (cb_params.cur_step_num - 1) % cb_params.batch_num + 1
        path = os.path.join(self._directory, f"{self._prefix}-{cb_params.cur_epoch_num}_{step_in_epoch}."
                                             f"{self._config.format}")
        keep = self._config.keep_checkpoint_max
        while keep and len(self._files) >= keep:
            oldest = self._files.pop(0)
            if os.path.exists(oldest):
                os.remove(oldest)
        append = dict(self._config.append_dict)
        if "epoch_num" in append:
            append["epoch_num"] = cb_params.cur_epoch_num
        if "step_num" in append:
            append["step_num"] = cb_params.cur_step_num
        save_checkpoint(cb_params.train_network, path, append_dict=append or None)
        if path in self._files:
            self._files.remove(path)
        self._files.append(path)
        self._last_triggered_step = cb_params.cur_step_num
        self.latest_ckpt_file_name = path
        cb_params.latest_ckpt_file = path
        cb_params.last_save_ckpt_step = cb_params.cur_step_num
