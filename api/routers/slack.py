"""POST /slack/events: where Slack delivers mentions and direct messages (see api/slack.py).

Not in the OpenAPI schema: Slack is its only client, and it authenticates by signature, not
by API key. A 404 says how to turn the bot on when it is off.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from slack_bolt.adapter.starlette.handler import to_bolt_request, to_starlette_response

from api.deps import ServiceDep

router = APIRouter(include_in_schema=False)


@router.post("/slack/events")
async def slack_events(request: Request, service: ServiceDep) -> Response:
    """Verifies Slack's signature, acknowledges, and leaves the answer to Bolt's workers."""
    if service.slack is None:
        raise HTTPException(
            status_code=404,
            detail="the Slack bot is off: set LOREHOUSE_SLACK_BOT_TOKEN and "
            "LOREHOUSE_SLACK_SIGNING_SECRET",
        )
    body = await request.body()
    # Signature checks and listener hand-off are quick but blocking: off the event loop.
    answered = await run_in_threadpool(service.slack.dispatch, to_bolt_request(request, body))
    return to_starlette_response(answered)
