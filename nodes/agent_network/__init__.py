"""agent_network (seed 003): a published network of agents hands control around until one responds."""
