"""The DPOT paper: its pre-training mixture, trainings and tables."""
