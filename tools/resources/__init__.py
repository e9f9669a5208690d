"""Resources addressed as ``res://<type>/<id>``: a searchable repository, the bundled story world, tools.

Imports nothing from graph code; the goal_pursuit protocol reads its context from here.
"""

from phasegraph.tools.resources.errors import ResourceError, ResourceNotFound
from phasegraph.tools.resources.index import SearchHit
from phasegraph.tools.resources.repository import Resource, ResourceRepository, bundled_world, load_bundled
from phasegraph.tools.resources.tools import RESOURCE_TOOLS, resource_registry

__all__ = [
    "RESOURCE_TOOLS",
    "Resource",
    "ResourceError",
    "ResourceNotFound",
    "ResourceRepository",
    "SearchHit",
    "bundled_world",
    "load_bundled",
    "resource_registry",
]
