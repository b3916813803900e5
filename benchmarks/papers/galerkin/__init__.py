"""The Galerkin Transformer paper (Cao 2021): Burgers and Darcy."""
