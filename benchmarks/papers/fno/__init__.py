"""FNO baselines: the FNO-nu rollout and the FNO's domain padding."""
