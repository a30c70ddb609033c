"""Measurement: exact peak memory, honest timing, kernel traces, and sweeps into tidy DataFrames."""
