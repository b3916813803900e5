"""``opformer bench``: time, memory and FLOPs per step of models across resolutions (not accuracy: see eval)."""
