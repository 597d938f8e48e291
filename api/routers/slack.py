"""POST /slack/events: where Slack delivers mentions and direct messages (see api/slack.py).

Not in the OpenAPI schema: Slack is its only client, and it authenticates by signature, not
by API key. A 404 says how to turn the bot on when it is off.
"""

from __future__ import annotations

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from slack_bolt.adapter.starlette.handler import to_starlette_response

from api.deps import ServiceDep
from api.slack import SlackRequestRefused, verified_request

router = APIRouter(include_in_schema=False)


@router.post("/slack/events")
async def slack_events(request: Request, service: ServiceDep) -> Response:
    """Verifies Slack's signature, acknowledges, and leaves the answer to Bolt's workers: 401
    for a request Slack did not sign, 400 for a signed body that is no Slack payload."""
    secret = service.settings.slack_signing_secret
    if service.slack is None or secret is None:
        raise HTTPException(
            status_code=404,
            detail="the Slack bot is off: set LOREHOUSE_SLACK_BOT_TOKEN and "
            "LOREHOUSE_SLACK_SIGNING_SECRET",
        )
    body = await request.body()
    try:
        verified = verified_request(secret, request.headers, request.query_params, body)
    except SlackRequestRefused as refused:
        raise HTTPException(status_code=refused.status, detail=str(refused)) from None
    # Bolt's own checks and the listener hand-off are quick but blocking: off the event loop.
    answered = await run_in_threadpool(service.slack.dispatch, verified)
    return to_starlette_response(answered)
