"""Entry points: the command line now, the HTTP server next. Depends on graphs, never the reverse."""
