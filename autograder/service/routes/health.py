"""``/health``, for the monitoring: 200 while submissions are graded, 503 with the reasons
while they cannot be (``Grader.problems``)."""
from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from .guards import Served

router = APIRouter()


@router.get("/health")
def health(service: Served) -> JSONResponse:
    """200 while submissions are graded; 503 with the reasons while they cannot be (``service.health``)."""
    return service.grader.health.answer(service.course.assignments, service.limits.upload_bytes)
