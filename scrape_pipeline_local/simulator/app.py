"""``create_app(sim)``: the FastAPI application serving a Simulator over HTTP."""

from __future__ import annotations

from fastapi import FastAPI, Request
from starlette.exceptions import HTTPException
from starlette.responses import Response

from scrape_pipeline_local.simulator.api_routes import api_router
from scrape_pipeline_local.simulator.engine import Simulator
from scrape_pipeline_local.simulator.errors import ApiError, error_response
from scrape_pipeline_local.simulator.gateway import Gateway
from scrape_pipeline_local.simulator.sim_routes import sim_router


def _correlation_id(request: Request) -> str:
    return str(request.scope.get("state", {}).get("correlation_id", ""))


def create_app(sim: Simulator) -> FastAPI:
    """The API (``/v1``) and the truth/fault routes (``/_sim``) in front of ``sim``."""
    app = FastAPI(title="Geonode Scraper API simulator", docs_url=None, redoc_url=None)
    api = api_router(sim)
    app.include_router(api)
    app.include_router(sim_router(sim))
    legacy = sim.config.legacy_error_shape

    # Errors become HTTP answers here only; 422 validation keeps FastAPI's {"detail": [...]}.
    async def on_api_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, ApiError)
        return error_response(exc, _correlation_id(request), legacy=legacy)

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        error = ApiError.for_status(exc.status_code, str(exc.detail))
        return error_response(error, _correlation_id(request), legacy=legacy)

    app.add_exception_handler(ApiError, on_api_error)
    app.add_exception_handler(HTTPException, on_http_error)
    app.add_middleware(Gateway, sim=sim, routes=list(api.routes))
    return app
