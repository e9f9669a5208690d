"""One module per protocol; ``graphs.registry`` maps protocol ids to them. Importing this is cheap."""
