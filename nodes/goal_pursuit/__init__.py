"""Goal pursuit (seed 001): context discovery, context refinement, action decision, refinement analysis."""
