"""The web app's adapter layer: pure renderers, the Gradio handlers and the MCP tools.

`layout.py` lays the page out and `wiring.py` wires its components to the handlers here (`app.py`
only starts the app); every rule (what a session is, what K may be, how a report is shown, who may see which ledger)
lives in this package and is tested without a server.
"""

import os

# Read by gradio at import time; set before any module of this package imports it.
os.environ["GRADIO_ANALYTICS_ENABLED"] = "False"
# Read when a Blocks makes its queue. After every event Gradio's queue rebuilds a pandas summary of the last
# GRADIO_ANALYTICS_MAX_EVENTS events (default 10,000: 2.5 ms per event with 1,000 recorded, 8.7 ms with 10,000,
# holding the interpreter the other visitors wait on) for its /monitoring dashboard, which the app turns off
# (webui.config.launch_options). Keep one record and never rebuild it. An operator's own setting wins.
os.environ.setdefault("GRADIO_ANALYTICS_MAX_EVENTS", "1")
os.environ.setdefault("GRADIO_ANALYTICS_CACHE_FREQUENCY", str(2**62))
