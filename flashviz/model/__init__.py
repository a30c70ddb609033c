"""Analytic models: FLOPs and HBM traffic of each algorithm, derived from the tile schedule."""
