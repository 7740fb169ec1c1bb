"""CAAL's OpenAI-compatible door, driven by the official `openai` package.

Usage: python openai_door.py BASE_URL TOKEN
Each check raises on failure; the last line printed is a JSON object of what
was seen, for tests/e2e/doors.rs to assert on.
"""

import json
import sys

import openai

base, token = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=f"{base}/v1", api_key=token, max_retries=0)
seen = {}

# The models CAAL answers as.
seen["models"] = [m.id for m in client.models.list().data]

# A whole answer; the conversation named by `user`.
done = client.chat.completions.create(
    model="caal",
    user="kitchen-door",
    messages=[{"role": "user", "content": "turn on the kitchen lights"}],
)
seen["reply"] = done.choices[0].message.content
seen["finish_reason"] = done.choices[0].finish_reason
seen["caal"] = done.model_extra.get("caal")
seen["object"] = done.object

# Streamed: the chunks put together are the reply.
stream = client.chat.completions.create(
    model="caal",
    user="kitchen-door",
    stream=True,
    messages=[
        {"role": "user", "content": "turn on the kitchen lights"},
        {"role": "assistant", "content": seen["reply"]},
        {"role": "user", "content": "turn off the kitchen lights"},
    ],
)
parts, finish, chunks = [], None, 0
for chunk in stream:
    chunks += 1
    delta = chunk.choices[0].delta
    if delta.content:
        parts.append(delta.content)
    finish = chunk.choices[0].finish_reason or finish
seen["streamed"] = "".join(parts)
seen["stream_chunks"] = chunks
seen["stream_finish"] = finish

# A governed command asks first; the next message answers it. No `user`:
# the conversation is derived from the thread's first message and comes
# back in the X-CAAL-Conversation header.
first = [{"role": "user", "content": "unlock the front door"}]
raw = client.chat.completions.with_raw_response.create(model="caal", messages=first)
asked = raw.parse()
seen["asked"] = asked.choices[0].message.content
seen["derived_conversation"] = raw.headers.get("x-caal-conversation")
seen["pending"] = asked.model_extra["caal"]["pending_confirmation"] is not None
yes = client.chat.completions.create(
    model="caal",
    messages=first
    + [
        {"role": "assistant", "content": seen["asked"]},
        {"role": "user", "content": [{"type": "text", "text": "yes"}]},
    ],
)
seen["confirmed"] = yes.choices[0].message.content
seen["confirmed_conversation"] = yes.model_extra["caal"]["conversation_id"]

# Bad input: OpenAI's own errors, as the client raises them.
try:
    client.chat.completions.create(model="caal", messages=[])
    seen["empty_messages"] = "accepted"
except openai.BadRequestError as e:
    seen["empty_messages"] = {"status": e.status_code, "param": e.body.get("param") if isinstance(e.body, dict) else None, "message": e.message}
try:
    openai.OpenAI(base_url=f"{base}/v1", api_key="wrong", max_retries=0).models.list()
    seen["wrong_key"] = "accepted"
except openai.AuthenticationError as e:
    seen["wrong_key"] = {"status": e.status_code}

print(json.dumps(seen))
