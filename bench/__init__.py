"""``make bench``: every figure a ratio against the anchor measured in the same run, on the same machine."""
