"""Settings the runtime reads from its environment, each declared once."""
