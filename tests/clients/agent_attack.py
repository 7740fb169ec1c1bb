"""CAAL's agent doors under attack, with the official `openai` and `mcp` packages.

Usage: python agent_attack.py CHECK BASE_URL TOKEN [ARGS…]
  threads      two OpenAI threads that open with the same words: the second
               thread's "yes" after something else does not confirm the first's unlock
  mcp SECRET   an MCP agent asks to unlock and says "yes" itself; names a
               conversation with a secret in it
The last line printed is a JSON object of what was seen, for tests/security.
"""

import asyncio
import json
import sys

import httpx2
import openai
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

check, base, token = sys.argv[1], sys.argv[2], sys.argv[3]
args = sys.argv[4:]
seen = {}


def threads():
    client = openai.OpenAI(base_url=f"{base}/v1", api_key=token, max_retries=0)

    def ask(messages):
        done = client.chat.completions.create(model="caal", messages=messages)
        return done.choices[0].message.content, done.model_extra["caal"]

    opening = {"role": "user", "content": "hello there"}
    hello, _ = ask([opening])
    # Thread A goes on to ask for the unlock.
    a = [opening, {"role": "assistant", "content": hello}, {"role": "user", "content": "unlock the front door"}]
    seen["a_asked"], caal = ask(a)
    seen["a_conversation"] = caal["conversation_id"]
    # Thread B opened with the same words (the same conversation), and says yes after hello.
    b = [opening, {"role": "assistant", "content": hello}, {"role": "user", "content": "yes"}]
    seen["b_yes"], caal = ask(b)
    seen["b_conversation"] = caal["conversation_id"]
    seen["still_pending"] = caal["pending_confirmation"] is not None
    # Thread A, which heard the question, confirms.
    a_yes = a + [{"role": "assistant", "content": seen["a_asked"]}, {"role": "user", "content": "yes"}]
    seen["a_yes"], _ = ask(a_yes)


async def mcp():
    secret = args[0]
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            asked = await client.call_tool("say", {"text": "unlock the front door"})
            seen["asked"] = asked.structured_content
            yes = await client.call_tool("say", {"text": "yes"})
            seen["yes"] = yes.structured_content
            bad = await client.call_tool("say", {"text": "hi", "conversation_id": f"my key {secret}"})
            seen["bad_error"] = bad.is_error
            seen["bad_text"] = "\n".join(c.text for c in bad.content if getattr(c, "type", "") == "text")
            found = await client.call_tool("trace_search", {"query": "kitchen", "conversation_id": secret + " x"})
            seen["search_text"] = "\n".join(c.text for c in found.content if getattr(c, "type", "") == "text")


if check == "threads":
    threads()
else:
    asyncio.run(mcp())
print(json.dumps(seen))
