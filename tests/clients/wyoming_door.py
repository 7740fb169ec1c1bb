"""CAAL's Wyoming door, driven by the `wyoming` package (Home Assistant's).

Usage: python wyoming_door.py HOST PORT
It does what Home Assistant's Wyoming integration does: asks what the
service offers, sends espeak-ng speech for transcription, sends the text for
handling with a conversation id in its context (confirming with a "yes"),
asks for speech, and sends a malformed event. The last line printed is a
JSON object of what was seen, for tests/e2e/doors.rs to assert on.
"""

import asyncio
import json
import subprocess
import sys
import tempfile
import wave

from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient
from wyoming.error import Error
from wyoming.handle import Handled, NotHandled
from wyoming.info import Describe, Info
from wyoming.tts import Synthesize

host, port = sys.argv[1], int(sys.argv[2])
seen = {}


def espeak(text):
    """espeak-ng's speech of `text`: (rate, width, channels, pcm)."""
    with tempfile.TemporaryDirectory() as d:
        path = f"{d}/said.wav"
        subprocess.run(["espeak-ng", "-v", "en-us", "-s", "150", "-w", path, text], check=True)
        with wave.open(path) as w:
            return w.getframerate(), w.getsampwidth(), w.getnchannels(), w.readframes(w.getnframes())


async def answer(client, *types):
    """The next event of one of `types` (others, like errors, are kept)."""
    while True:
        event = await asyncio.wait_for(client.read_event(), timeout=120)
        assert event is not None, "the connection closed"
        if Error.is_type(event.type):
            raise AssertionError(f"error: {Error.from_event(event)}")
        if event.type in types:
            return event


async def transcribe(text, chunk_ms=100):
    rate, width, channels, pcm = espeak(text)
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(rate=rate, width=width, channels=channels).event())
        step = rate * width * channels * chunk_ms // 1000
        for at in range(0, len(pcm), step):
            chunk = AudioChunk(rate=rate, width=width, channels=channels, audio=pcm[at : at + step])
            await client.write_event(chunk.event())
        await client.write_event(AudioStop().event())
        return Transcript.from_event(await answer(client, "transcript"))


async def handle(text, conversation, satellite="assist_satellite.kitchen", area=None):
    async with AsyncTcpClient(host, port) as client:
        context = {"conversation_id": conversation, "satellite_id": satellite}
        if area is not None:
            context["area"] = area
        await client.write_event(Transcript(text, context=context, language="en").event())
        event = await answer(client, "handled", "not-handled")
        if Handled.is_type(event.type):
            h = Handled.from_event(event)
            return {"handled": True, "text": h.text, "context": h.context}
        n = NotHandled.from_event(event)
        return {"handled": False, "text": n.text, "context": n.context}


async def main():
    # What is offered, as the integration asks when it is added.
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(Describe().event())
        info = Info.from_event(await answer(client, "info"))
    seen["asr"] = [p.name for p in info.asr if p.installed]
    seen["asr_languages"] = [l for p in info.asr for m in p.models for l in m.languages]
    seen["handle"] = [p.name for p in info.handle if p.installed]
    seen["home_control"] = all(p.supports_home_control for p in info.handle)
    seen["tts"] = [p.name for p in info.tts if p.installed]

    # Speech to text, then the text handled, as Home Assistant's pipeline does.
    heard = await transcribe("turn on the kitchen lights")
    seen["heard"] = heard.text
    # Home Assistant names conversations with ULIDs.
    conversation = "01JD5Z7KXQ8M3V2N6R4T9W0ABC"
    seen["lights"] = await handle(heard.text, conversation)

    # A level-3 command asks; the "yes" in the same conversation runs it.
    unlock = await transcribe("unlock the front door")
    seen["unlock_heard"] = unlock.text
    seen["asked"] = await handle(unlock.text, conversation)
    seen["confirmed"] = await handle("yes", conversation)

    # What carries no request is not handled, and CAAL says what it needs.
    seen["nothing"] = await handle("...", conversation)

    # Where the satellite is: configured by its id or address, or said in
    # the context; "the lights" and "in here" act there.
    other = "01JD5Z7KXQ8M3V2N6R4T9W0DEF"
    seen["here"] = await handle("turn off the lights in here", other, satellite="assist_satellite.hall")
    seen["by_address"] = await handle("turn on the lights", other, satellite="assist_satellite.porch")
    seen["said_area"] = await handle("turn on the lights", other, area="Lounge")
    seen["no_such_area"] = await handle("turn on the lights", other, area="attic")

    # Text to speech: 16-bit audio, as much as a second of it.
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(Synthesize(text="The kitchen lights are on.").event())
        start = AudioStart.from_event(await answer(client, "audio-start"))
        samples = 0
        while True:
            event = await answer(client, "audio-chunk", "audio-stop")
            if AudioStop.is_type(event.type):
                break
            samples += AudioChunk.from_event(event).samples
    seen["spoken"] = {"rate": start.rate, "width": start.width, "channels": start.channels,
                      "seconds": samples / start.rate}

    # A malformed event: the protocol's own error, then the connection ends.
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(b'{"type": "audio-chunk", "payload_length": "lots"}\n')
    await writer.drain()
    line = await asyncio.wait_for(reader.readline(), timeout=10)
    header = json.loads(line)
    data = json.loads(await reader.readexactly(header["data_length"]))
    seen["malformed"] = {"type": header["type"], "code": data.get("code"), "text": data.get("text")}
    seen["malformed_closed"] = (await asyncio.wait_for(reader.read(1), timeout=10)) == b""
    writer.close()

    # The service still answers.
    async with AsyncTcpClient(host, port) as client:
        await client.write_event(Describe().event())
        seen["after_malformed"] = (await answer(client, "info")).type


asyncio.run(main())
print(json.dumps(seen))
