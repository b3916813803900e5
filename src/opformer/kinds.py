"""The kinds of data set and of run.

Data: operator pairs (input -> target on one grid), trajectories (frames of a time-dependent PDE) and mesh data
(operator pairs or trajectories on the points of a mesh or point cloud, with varying point counts). A data file's
``kind`` attribute, a solver's output, a reader's result and a run's task all say one of these; a mesh file's
``mesh["task"]`` says which of the first two it holds.

Runs (:attr:`opformer.runs.Run.kind`): a run trained on one file has that data's kind; one trained on several
trajectory files is a mixture; weights that ``opformer import`` wrote are imported. Evaluation, plots and
predictions dispatch on it.
"""

OPERATOR, TRAJECTORY = "operator", "trajectory"
MESH = "mesh"
#: Every data kind, in the order messages list them.
DATA_KINDS = (OPERATOR, TRAJECTORY, MESH)
MIXTURE, IMPORTED = "mixture", "imported"
#: Every run kind.
RUN_KINDS = (OPERATOR, TRAJECTORY, MESH, MIXTURE, IMPORTED)
