"""CAAL's Wyoming door under attack, with the `wyoming` package's own framing.

Usage: python wyoming_attack.py CHECK HOST PORT [ARGS…]
Each check does what a hostile peer (or a second satellite) would, and prints
a JSON object of what it saw as its last line, for tests/security to assert on:

  auth TOKEN          no secret, a wrong one, the right one (caal-auth first)
  peers               a satellite asks to unlock; another peer (127.0.0.2)
                      answers "yes"/"no" in its conversation and sends the
                      satellite's words; the satellite answers
  unicode             texts to handle whose words are not ASCII
  synthesize N        N characters to speak
  idle                a connection that says nothing
  flood N             N silent connections, then one that asks
"""

import asyncio
import json
import subprocess
import sys
import tempfile
import time
import wave

from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.event import Event, async_read_event, async_write_event
from wyoming.info import Describe
from wyoming.tts import Synthesize

check, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
args = sys.argv[4:]
seen = {}


class Peer:
    """One connection from `local` (a loopback address of its own)."""

    def __init__(self, local="127.0.0.1"):
        self.local = local

    async def __aenter__(self):
        self.reader, self.writer = await asyncio.open_connection(host, port, local_addr=(self.local, 0))
        return self

    async def __aexit__(self, *exc):
        self.writer.close()

    async def send(self, event):
        await async_write_event(event.event() if hasattr(event, "event") else event, self.writer)

    async def read(self, timeout=120):
        """The next event, or None when the connection closed."""
        try:
            return await asyncio.wait_for(async_read_event(self.reader), timeout=timeout)
        except ConnectionError:
            return None

    async def until(self, *types, timeout=120):
        while True:
            event = await self.read(timeout)
            if event is None or event.type in types or event.type == "error":
                return event


def error_of(event):
    if event is None:
        return None
    return {"type": event.type, "code": event.data.get("code"), "text": event.data.get("text")}


async def handle(text, conversation, local="127.0.0.1"):
    async with Peer(local) as p:
        context = {"conversation_id": conversation}
        await p.send(Transcript(text, context=context, language="en"))
        event = await p.until("handled", "not-handled")
        if event is None or event.type == "error":
            return {"error": error_of(event)}
        return {"type": event.type, "text": event.data.get("text"), "context": event.data.get("context")}


def espeak(text):
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/said.wav"
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", path, text], check=True)
        with wave.open(path) as w:
            return w.getframerate(), w.getsampwidth(), w.getnchannels(), w.readframes(w.getnframes())


async def transcribe(text, local="127.0.0.1"):
    rate, width, channels, pcm = espeak(text)
    async with Peer(local) as p:
        await p.send(Transcribe(language="en"))
        await p.send(AudioStart(rate=rate, width=width, channels=channels))
        step = rate * width * channels // 10
        for at in range(0, len(pcm), step):
            await p.send(AudioChunk(rate=rate, width=width, channels=channels, audio=pcm[at : at + step]))
        await p.send(AudioStop())
        event = await p.until("transcript")
        return event.data.get("text") if event is not None and event.type == "transcript" else error_of(event)


async def auth():
    token = args[0]
    # No secret: refused by name, then closed.
    async with Peer() as p:
        await p.send(Describe())
        seen["none"] = error_of(await p.read(15))
        seen["none_closed"] = (await p.read(15)) is None
    # A wrong secret.
    async with Peer() as p:
        await p.send(Event("caal-auth", {"token": token + "x"}))
        await p.send(Describe())
        seen["wrong"] = error_of(await p.read(15))
        seen["wrong_closed"] = (await p.read(15)) is None
    # The secret: the door answers as Home Assistant expects.
    async with Peer() as p:
        await p.send(Event("caal-auth", {"token": token}))
        await p.send(Describe())
        seen["right"] = (await p.until("info")).type
    seen["handled"] = await _authed_handle(token, "turn on the kitchen lights")


async def _authed_handle(token, text):
    async with Peer() as p:
        await p.send(Event("caal-auth", {"token": token}))
        await p.send(Transcript(text, context={"conversation_id": "sat-1"}, language="en"))
        event = await p.until("handled", "not-handled")
        return event.data.get("text") if event is not None else None


async def peers():
    conversation = "01JD5Z7KXQ8M3V2N6R4T9W0XYZ"
    seen["asked"] = await handle("unlock the front door", conversation)
    # Another peer answers in the satellite's conversation: neither counts.
    seen["other_yes"] = await handle("yes", conversation, local="127.0.0.2")
    seen["other_no"] = await handle("no", conversation, local="127.0.0.2")
    # The satellite's own yes does.
    seen["own_yes"] = await handle("yes", conversation)
    # Speech heard from the satellite links only to the satellite's own text.
    seen["heard"] = await transcribe("turn off the kitchen lights")
    seen["other_text"] = await handle(seen["heard"], "01JD5Z7KXQ8M3V2N6R4T9W0OTH", local="127.0.0.2")
    seen["own_text"] = await handle(seen["heard"], "01JD5Z7KXQ8M3V2N6R4T9W0OWN")
    # A conversation another door started cannot be reached by naming it.
    seen["named_default"] = await handle("yes", "default", local="127.0.0.2")


async def unicode():
    seen["replies"] = []
    for text in [
        "add émincé to the shopping list",
        "remind me to call Élodie",
        "добавь молоко в список покупок",
        "把牛奶加到购物清单",
        "أضف الحليب إلى قائمة التسوق",
        "ｙｅｓ",
        "lock the 🚪 at the back",
    ]:
        seen["replies"].append(await handle(text, "01JD5Z7KXQ8M3V2N6R4T9W0UNI"))


async def synthesize():
    n = int(args[0])
    text = ("The kitchen lights are on and the front door is locked. " * (n // 56 + 1))[:n]
    async with Peer() as p:
        started = time.monotonic()
        await p.send(Synthesize(text=text))
        chunks, first = 0, None
        while True:
            event = await p.read(300)
            if event is None or event.type in ("audio-stop", "error"):
                break
            if event.type == "audio-chunk":
                chunks += 1
                if first is None:
                    first = time.monotonic() - started
        seen["end"] = event.type if event is not None else None
        seen["error"] = error_of(event) if event is not None and event.type == "error" else None
        seen["chunks"] = chunks
        seen["first_chunk_s"] = first


async def idle():
    async with Peer() as p:
        started = time.monotonic()
        closed = (await p.read(30)) is None
        seen["closed"] = closed
        seen["after_s"] = time.monotonic() - started


async def flood():
    n = int(args[0])
    silent = []
    for _ in range(n):
        p = Peer()
        await p.__aenter__()
        silent.append(p)
    # One that asks is answered, however many wait silently.
    async with Peer() as p:
        await p.send(Describe())
        event = await p.until("info", timeout=30)
        seen["answered"] = event.type if event is not None else None
    closed = 0
    for p in silent:
        try:
            closed += (await p.read(0.5)) is None
        except (asyncio.TimeoutError, ConnectionError):
            pass
        await p.__aexit__()
    seen["silent_closed"] = closed


asyncio.run({"auth": auth, "peers": peers, "unicode": unicode, "synthesize": synthesize,
             "idle": idle, "flood": flood}[check]())
print(json.dumps(seen, ensure_ascii=False))
