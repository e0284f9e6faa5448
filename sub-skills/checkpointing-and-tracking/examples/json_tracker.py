"""A dependency-free experiment tracker for Accelerate 1.15.0 (JSON Lines on disk).

Subclasses accelerate.tracking.GeneralTracker and is registered by name with
accelerate.tracking.register_tracker_class, so it is selected exactly like a
built-in tracker: Accelerator(log_with="jsonl", project_config=...). Because
requires_logging_directory is True, Accelerator.init_trackers passes
(project_name, logging_dir) to the constructor.

Output: <logging_dir>/<project_name>/metrics.jsonl, one JSON object per line:
  {"event": "config", "values": {...}}
  {"event": "log", "step": 3, "values": {"loss": 0.25}}
  {"event": "finish"}
"""
from __future__ import annotations

import json
import os

from accelerate.tracking import GeneralTracker, register_tracker_class


class JsonLinesTracker(GeneralTracker):
    name = "jsonl"
    requires_logging_directory = True
    main_process_only = True

    def __init__(self, run_name: str, logging_dir: str, **kwargs):
        super().__init__()
        self.run_name = run_name
        self.path = os.path.join(logging_dir, run_name, "metrics.jsonl")
        self._fh = None

    def start(self):
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        self._fh = open(self.path, "a", encoding="utf-8")

    @property
    def tracker(self):
        return self._fh

    def _write(self, record: dict) -> None:
        self._fh.write(json.dumps(record, sort_keys=True) + "\n")
        self._fh.flush()

    def store_init_configuration(self, values: dict):
        self._write({"event": "config", "values": values})

    def log(self, values: dict, step: int | None = None, **kwargs):
        self._write({"event": "log", "step": step, "values": values})

    def finish(self):
        if self._fh is not None:
            self._write({"event": "finish"})
            self._fh.close()
            self._fh = None


register_tracker_class(JsonLinesTracker)
