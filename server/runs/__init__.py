"""The run engine: starting, driving, pausing, resuming and taking over runs; the event log, live fan-out."""
