"""Calibrated bounds, fallback and scores measured on trained runs."""
