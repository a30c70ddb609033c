"""flashviz: `streamlit run app.py` serves the dashboard (dashboard.py, the Streamlit page) as a Streamlit st.App, the
server object through which an app adds its own HTTP routes next to Streamlit's."""

import streamlit as st

app = st.App("dashboard.py")
