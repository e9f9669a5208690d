"""Optional bearer tokens, each scoped to a set of projects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import HTTPException, Request

from phasegraph.nodes.errors import ConfigurationError


@dataclass(frozen=True)
class Access:
    """What the caller may see: every project, or the listed ones."""

    projects: frozenset[str] | None  # None: all projects (auth off, or a "*" token)
    named: str | None = None  # the project the request's ?projectId= named (the only one it may act on)

    def covers(self, project_id: str) -> bool:
        """True when the caller may act on ``project_id``."""
        return self.projects is None or project_id in self.projects

    def require(self, project_id: str) -> None:
        """Refuse (403) a project the query did not name, or the token does not cover, saying which."""
        if self.named is not None and project_id != self.named:
            said = f"?projectId={self.named} and the request's project {project_id!r} differ"
            raise HTTPException(403, f"{said}: name one project")
        if not self.covers(project_id):
            raise HTTPException(403, f"this token does not cover project {project_id!r}")


OPEN = Access(projects=None)


def parse_tokens(spec: str) -> dict[str, Access]:
    """Parse ``tokenA:projX,projY;tokenB:*`` into token → Access."""
    tokens: dict[str, Access] = {}
    for entry in filter(None, (part.strip() for part in spec.split(";"))):
        token, sep, projects = entry.partition(":")
        names = frozenset(p.strip() for p in projects.split(",") if p.strip())
        if not sep or not token.strip() or not names:
            raise ConfigurationError(
                "PHASEGRAPH_API_TOKENS entries look like 'token:projA,projB' or 'token:*'"
            )
        tokens[token.strip()] = OPEN if "*" in names else Access(projects=names)
    return tokens


def access_for(request: Request, tokens: dict[str, Access]) -> Access:
    """The caller's access; 401 when tokens are configured and none (or an unknown one) was sent."""
    if not tokens:
        return OPEN
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    access = tokens.get(token.strip()) if scheme.lower() == "bearer" else None
    if access is None:
        raise HTTPException(401, "a valid bearer token is required", headers={"WWW-Authenticate": "Bearer"})
    return access


#: The app's dependency that gives a route its caller's Access (built once from the app's tokens).
Caller = Callable[..., Access]
