"""Trust in a surrogate's answers: calibrated error bounds (split conformal prediction), the flag of inputs unlike
the calibration data, and the solver where the bounds are too wide."""
