"""The kinds of data set: operator pairs (input -> target on one grid) and trajectories (frames of a
time-dependent PDE). A data file's ``kind`` attribute, a solver's output, a reader's result and a run's task
all say one of these."""

OPERATOR, TRAJECTORY = "operator", "trajectory"
#: Every data kind, in the order messages list them.
DATA_KINDS = (OPERATOR, TRAJECTORY)
