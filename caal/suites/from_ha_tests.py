#!/usr/bin/env python3
"""Derives `ha-en.jsonl` from Home Assistant's English intent tests.

The tests (CC BY 4.0, (c) Home Assistant contributors; see README.md here)
say which intent and slots each sentence must give. This keeps the cases
whose intent the default configuration maps to a CAAL command and whose
areas and devices the default home has, and writes what CAAL must decide:
the command and its parameters. Usage:

    python3 caal/suites/from_ha_tests.py ../shared/data/ha-intents-tests/en > caal/suites/ha-en.jsonl
"""

import json
import pathlib
import sys

import yaml

# The default home (config/caal.toml [home]), by the names the tests use.
AREAS = {"kitchen", "living room", "dining room", "bedroom", "guest room", "office",
         "bathroom", "hall", "entrance", "garage", "outside"}
DEVICES = {  # name -> (domain, id)
    "bedroom lamp": ("light", "bedroom lamp"),
    "living room lamp": ("light", "living room lamp"),
    "kitchen ceiling": ("light", "kitchen ceiling"),
    "kitchen countertop": ("light", "kitchen countertop"),
    "kitchen cabinets": ("light", "kitchen cabinets"),
    "garage light": ("light", "garage light"),
    "front door": ("lock", "front"),
    "back door": ("lock", "back"),
    "side door": ("lock", "side"),
    "garage door": ("cover", "garage"),
    "thermostat": ("climate", "thermostat"),
    "shopping list": ("todo", "shopping list"),
}


TIMER_COMMANDS = {
    "HassCancelTimer": "timer.cancel",
    "HassPauseTimer": "timer.pause",
    "HassUnpauseTimer": "timer.resume",
    "HassTimerStatus": "timer.status",
    "HassIncreaseTimer": "timer.add",
    "HassDecreaseTimer": "timer.subtract",
}


def seconds_of(s, prefix=""):
    return round(s.get(prefix + "hours", 0) * 3600 + s.get(prefix + "minutes", 0) * 60
                 + s.get(prefix + "seconds", 0))


def timer_expect(intent, s):
    """A timer intent: the timer named (or, said of a timer, its room) or
    the length it was set for picks it; the names a test accepts must agree."""
    name = s.get("name")
    if isinstance(name, list):
        names = {n.strip() for n in name}
        if len(names) != 1:
            return None
        name = names.pop()
    if name is None and s.get("area") is not None:
        if s["area"] not in AREAS:
            return None
        name = s["area"]
    params = {}
    if name is not None:
        params["name"] = name
    if intent == "HassStartTimer":
        if "conversation_command" in s:
            return None
        params["duration"] = seconds_of(s)
        return "timer.set", params
    if intent == "HassCancelAllTimers":
        return "timer.cancel_all", {}
    if seconds_of(s, "start_"):
        params["start"] = seconds_of(s, "start_")
    if intent in ("HassIncreaseTimer", "HassDecreaseTimer"):
        params["duration"] = seconds_of(s)
    return TIMER_COMMANDS[intent], params


def expect(intent, slots):
    """The CAAL command and parameters for a test's intent and slots, or None."""
    s = {k: (v.lower() if isinstance(v, str) else v) for k, v in slots.items()}
    if intent in TIMER_COMMANDS or intent in ("HassStartTimer", "HassCancelAllTimers"):
        s = {k: ([x.lower() for x in v] if isinstance(v, list) else v) for k, v in s.items()}
        return timer_expect(intent, s)
    if any(isinstance(v, (list, dict)) for v in s.values()):
        return None  # a test that accepts several answers: not one CAAL decision
    name, area = s.get("name"), s.get("area")
    if area is not None and area not in AREAS:
        return None
    if s.get("floor") is not None:
        return None
    device = DEVICES.get(name) if name is not None else None
    if name is not None and device is None:
        return None
    domain = s.get("domain") or (device[0] if device else None)
    if isinstance(domain, list):
        return None
    if intent in ("HassTurnOn", "HassTurnOff"):
        on = intent == "HassTurnOn"
        if domain == "light":
            if device:
                return "light.set", {"device": name, "state": "on" if on else "off"}
            return "lights.set", {"room": area or "all", "state": "on" if on else "off"}
        if domain == "lock" and device:
            return ("door.lock" if on else "door.unlock"), {"door": name}
        if domain == "cover" and (s.get("device_class") == "garage" or name == "garage door"):
            return ("garage.open" if on else "garage.close"), {}
        return None
    if intent == "HassLightSet":
        if "brightness" not in s or set(s) - {"brightness", "area", "name", "domain"}:
            return None
        if device:
            return "light.brightness", {"device": name, "level": s["brightness"]}
        return "lights.brightness", {"room": area or "all", "level": s["brightness"]}
    if intent == "HassClimateSetTemperature":
        # The default thermostat takes 10-30 °C; a test outside that is a refusal here.
        if name not in (None, "thermostat") or "temperature" not in s or not 10 <= s["temperature"] <= 30:
            return None
        return "thermostat.set", {"temperature": s["temperature"]}
    if intent in ("HassShoppingListAddItem",) or (intent == "HassListAddItem" and name == "shopping list"):
        return "shopping.add", {"item": s["item"]}
    return None


def main(folder):
    out = []
    for path in sorted(pathlib.Path(folder).glob("*.yaml")):
        if path.name.startswith("_"):
            continue
        doc = yaml.safe_load(path.read_text())
        for test in doc.get("tests", []):
            intent = test["intent"]["name"]
            slots = test["intent"].get("slots", {}) or {}
            found = expect(intent, slots)
            if found is None:
                continue
            command, params = found
            context = test["intent"].get("context") or {}
            for sentence in test["sentences"]:
                line = {"text": sentence, "command": command, "params": params}
                if context.get("area"):
                    line["context"] = {"area": context["area"].lower()}
                out.append(line)
    print("# Derived from Home Assistant's intent tests (tests/en, CC BY 4.0, (c) Home Assistant contributors) by from_ha_tests.py")
    for line in out:
        print(json.dumps(line, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1])
