"""The ``phasegraph`` command (``main``) and its sub-commands, one module each."""
