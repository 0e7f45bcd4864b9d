"""The web app's adapter layer: pure renderers, the Gradio handlers and the MCP tools.

`layout.py` lays the page out and `wiring.py` wires its components to the handlers here (`app.py`
only starts the app); every rule (what a session is, what K may be, how a report is shown, who may see which ledger)
lives in this package and is tested without a server.
"""

import os

# Read by gradio at import time; set before any module of this package imports it.
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
