"""The web page (``/`` and its ``/static`` files) and the health check."""

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse

#: The page's files: one HTML page, its scripts and its style sheet.
STATIC = Path(__file__).resolve().parent / "static"


def page_routes() -> APIRouter:
    """``GET /healthz`` and ``GET /`` (the page itself; the app mounts ``/static``)."""
    router = APIRouter()

    @router.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @router.get("/", response_class=HTMLResponse)
    async def index() -> FileResponse:
        return FileResponse(STATIC / "index.html")

    return router
