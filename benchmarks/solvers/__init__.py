"""The built-in PDE solvers: speed and accuracy of data generation, and solver against surrogate."""
