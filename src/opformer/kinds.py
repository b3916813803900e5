"""The kinds of data set and of run.

Data: operator pairs (input -> target on one grid) and trajectories (frames of a time-dependent PDE). A data file's
``kind`` attribute, a solver's output, a reader's result and a run's task all say one of these.

Runs (:attr:`opformer.runs.Run.kind`): a run trained on one file of operator pairs or of trajectories has that
data's kind; one trained on several trajectory files is a mixture; weights that ``opformer import`` wrote are
imported. Evaluation, plots and predictions dispatch on it.
"""

OPERATOR, TRAJECTORY = "operator", "trajectory"
#: Every data kind, in the order messages list them.
DATA_KINDS = (OPERATOR, TRAJECTORY)
MIXTURE, IMPORTED = "mixture", "imported"
#: Every run kind.
RUN_KINDS = (OPERATOR, TRAJECTORY, MIXTURE, IMPORTED)
