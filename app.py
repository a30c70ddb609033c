"""flashviz: `streamlit run app.py` serves the dashboard (dashboard.py, the Streamlit page) as a Streamlit st.App, the
server object through which an app adds its own HTTP routes next to Streamlit's. One route: the app's page, with the
first chart already in it (flashviz.ui.first_page), so that a browser draws the tile map before Streamlit's JavaScript
has even loaded."""

import streamlit as st

from flashviz.ui.first_page import routes

app = st.App("dashboard.py", routes=routes())
