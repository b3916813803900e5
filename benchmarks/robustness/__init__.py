"""Fault injection and fuzzing: every bad input ends in one line."""
