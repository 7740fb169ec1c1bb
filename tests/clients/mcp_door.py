"""CAAL's MCP door, driven by the official MCP Python SDK (`mcp`).

Usage: python mcp_door.py http URL TOKEN        (streamable HTTP, `caal serve`'s /mcp)
       python mcp_door.py stdio CAAL DATA_DIR   (`caal mcp` started as a process)
The same checks over either transport; the last line printed is a JSON
object of what was seen, for tests/e2e/doors.rs to assert on.
"""

import asyncio
import json
import os
import sys

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

mode = sys.argv[1]
seen = {}


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def checks(client, on_page=None):
    tools = await client.list_tools()
    seen["tools"] = sorted(t.name for t in tools.tools)
    say_tool = next(t for t in tools.tools if t.name == "say")
    seen["say_schema_required"] = say_tool.input_schema.get("required")

    # A round (in the door's own namespace), then a governed command the
    # agent cannot confirm itself: a person does, on the page.
    lights = await client.call_tool("say", {"text": "turn on the kitchen lights", "conversation_id": "kitchen"})
    seen["lights"] = {"text": text_of(lights), "structured": lights.structured_content, "error": lights.is_error}
    conversation_id = lights.structured_content["conversation_id"]
    asked = await client.call_tool("say", {"text": "unlock the front door", "conversation_id": "kitchen"})
    seen["asked"] = asked.structured_content
    refused = await client.call_tool("say", {"text": "yes", "conversation_id": "kitchen"})
    seen["refused"] = refused.structured_content
    if on_page:
        await on_page(conversation_id)

    # The trace: searched, shown, verified.
    found = await client.call_tool("trace_search", {"query": "kitchen lights", "conversation_id": conversation_id})
    seen["search"] = found.structured_content
    round_id = lights.structured_content["round_id"]
    shown = await client.call_tool("round_show", {"round_id": round_id})
    seen["shown_types"] = [e["event_type"] for e in shown.structured_content["events"]]
    missing = await client.call_tool("round_show", {"round_id": "01a20cd0-0000-7000-8000-000000000000"})
    seen["missing"] = {"error": missing.is_error, "text": text_of(missing)}
    verified = await client.call_tool("trace_verify", {})
    seen["verify"] = {"ok": verified.structured_content["ok"], "text": text_of(verified)}

    # Memory: remembered, then found.
    remembered = await client.call_tool("remember", {"text": "the spare key is under the blue pot"})
    seen["remembered"] = remembered.structured_content
    hits = await client.call_tool("bucket_search", {"query": "spare key"})
    seen["memory"] = text_of(hits)

    # Resources: the conversations, one conversation, one round.
    resources = await client.list_resources()
    seen["resources"] = sorted(r.uri.__str__() for r in resources.resources)
    templates = await client.list_resource_templates()
    seen["templates"] = sorted(t.uri_template for t in templates.resource_templates)
    conversation = await client.read_resource(f"caal://conversations/{conversation_id}")
    body = json.loads(conversation.contents[0].text)
    seen["conversation_rounds"] = len(body["rounds"])
    one = await client.read_resource(f"caal://rounds/{round_id}")
    seen["round_resource"] = json.loads(one.contents[0].text)["round"]["round_id"]

    # Wrong arguments: MCP's own tool error (so a model can correct itself),
    # and the session goes on.
    seen["wrong"] = []
    for args in ({"txt": "hello"}, {"text": 42}, {}):
        wrong = await client.call_tool("say", args)
        seen["wrong"].append({"error": wrong.is_error, "text": text_of(wrong)})
    try:
        await client.call_tool("no_such_tool", {})
        seen["unknown_tool"] = "accepted"
    except Exception as e:
        seen["unknown_tool"] = str(e)
    try:
        await client.read_resource("caal://nowhere/1")
        seen["bad_resource"] = "accepted"
    except Exception as e:
        seen["bad_resource"] = str(e)
    again = await client.call_tool("say", {"text": "turn off the kitchen lights", "conversation_id": "kitchen"})
    seen["after_wrong"] = text_of(again)


async def main():
    if mode == "http":
        url, token = sys.argv[2], sys.argv[3]
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:

            async def on_page(conversation_id):
                # The unlock the agent asked for waits on the page; a person confirms it there.
                pending = (await http.get(f"{url}/api/pending")).json()["pending"]
                waiting = [p for p in pending if p["conversation_id"] == conversation_id]
                seen["waiting_on_page"] = len(waiting)
                confirmation = waiting[0]["pending"]["confirmation_id"]
                confirmed = await http.post(f"{url}/api/pending/{confirmation}/confirm")
                seen["confirmed_on_page"] = confirmed.json()["reply"]

            async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                seen["server"] = client.server_info.name if client.server_info else None
                await checks(client, on_page)
        # Without the token: refused before MCP.
        async with httpx2.AsyncClient(timeout=10) as http:
            r = await http.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                                headers={"Accept": "application/json, text/event-stream"})
            seen["no_token_status"] = r.status_code
    else:
        caal, data_dir = sys.argv[2], sys.argv[3]
        # The server gets this process's environment (the test's settings).
        params = StdioServerParameters(command=caal, args=["mcp", "--data-dir", data_dir], env=dict(os.environ))
        async with Client(params) as client:
            seen["server"] = client.server_info.name if client.server_info else None
            await checks(client)


asyncio.run(main())
print(json.dumps(seen, default=str))
