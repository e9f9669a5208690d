"""The planner protocol (seed 002): one streaming planner session with a plan meta-tool."""
