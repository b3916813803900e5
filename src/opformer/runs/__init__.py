"""Run directories: their files (:mod:`~opformer.runs.directory`), the checkpoint format
(:mod:`~opformer.runs.checkpoint`) and :class:`Run`, the one way to open a run for reading."""

from opformer.runs.checkpoint import (CHECKPOINT_FORMAT, CHECKPOINT_VERSION, checksum, load_checkpoint, load_weights,
                                      save_checkpoint, surrogate_of)
from opformer.runs.directory import (CALIBRATION, CONFIG, METRICS, SESSIONS, SUMMARY, check_fresh, end_session,
                                     finite_json, import_record, metrics_csv, record_import, recorded_sessions,
                                     run_checkpoint, run_lock, start_session, write_metrics, write_run_config,
                                     write_summary)
from opformer.runs.run import (CALIBRATION_FORMAT, CALIBRATION_VERSION, IMPORTED, MIXTURE, OPERATOR, TRAJECTORY, Run,
                              save_calibration_record)

__all__ = ["CALIBRATION", "CALIBRATION_FORMAT", "CALIBRATION_VERSION", "CHECKPOINT_FORMAT", "CHECKPOINT_VERSION",
           "CONFIG", "IMPORTED", "METRICS", "MIXTURE", "OPERATOR", "Run", "SESSIONS", "SUMMARY", "TRAJECTORY",
           "check_fresh", "checksum", "end_session", "finite_json", "import_record", "load_checkpoint",
           "load_weights", "metrics_csv", "record_import", "recorded_sessions", "run_checkpoint", "run_lock",
           "save_calibration_record", "save_checkpoint", "start_session", "surrogate_of", "write_metrics",
           "write_run_config", "write_summary"]
