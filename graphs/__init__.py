"""One module per protocol; ``registry`` maps protocol ids to them. Importing this is cheap."""
