"""Figures: DataFrames and traces -> plotly Figures and HTML reports. Imports neither torch nor streamlit."""
