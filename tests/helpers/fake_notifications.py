"""A fake desktop notification server on a private D-Bus session bus, for the tests.

Run as ``python -m tests.helpers.fake_notifications ADDRESS LOG [CAPABILITIES]``: it owns
``org.freedesktop.Notifications`` on the bus at ``ADDRESS`` and implements what a desktop's
notification daemon does for us (``Notify``, ``GetCapabilities``, ``CloseNotification``,
``GetServerInformation``), writing each ``Notify`` call to ``LOG`` as a JSON line. A test
makes it behave as if the analyst clicked an action by calling ``Invoke(id, key)`` on the
test interface ``org.desktopagent.TestNotifications``: it then emits ``ActionInvoked``.
Written with jeepney (pure Python) so that the server under test, QtDBus, talks to
something independent of it.
"""

from __future__ import annotations

import json
import sys

from jeepney import DBusAddress, HeaderFields, MessageType, new_error, new_method_return, new_signal
from jeepney.bus_messages import message_bus
from jeepney.io.blocking import open_dbus_connection

SERVICE = "org.freedesktop.Notifications"
PATH = "/org/freedesktop/Notifications"
TEST_INTERFACE = "org.desktopagent.TestNotifications"


def main(address: str, log: str, capabilities: list[str]) -> None:
    """Serve until the bus goes away."""
    conn = open_dbus_connection(bus=address)
    reply = conn.send_and_get_reply(message_bus.RequestName(SERVICE, 4))
    if reply.body[0] != 1:
        raise SystemExit(f"could not own {SERVICE}: {reply.body}")
    emitter = DBusAddress(PATH, interface=SERVICE)
    next_id = 0
    print("ready", flush=True)
    while True:
        msg = conn.receive()
        if msg.header.message_type != MessageType.method_call:
            continue
        member = msg.header.fields.get(HeaderFields.member)
        signature = msg.header.fields.get(HeaderFields.signature, "")
        if member == "Notify" and signature != "susssasa{sv}i":
            # As a real daemon does: the arguments must have the specification's types.
            conn.send(new_error(msg, "org.freedesktop.DBus.Error.InvalidArgs", "s", (signature,)))
        elif member == "Notify":
            app, replaces, icon, summary, body, actions, hints, timeout = msg.body
            if replaces:
                nid = replaces
            else:
                next_id += 1
                nid = next_id
            record = {
                "id": nid, "app": app, "replaces_id": replaces, "icon": icon,
                "summary": summary, "body": body, "actions": list(actions),
                "hints": {k: v[1] for k, v in hints.items()}, "timeout": timeout,
            }  # fmt: skip
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps(record, default=str) + "\n")
            conn.send(new_method_return(msg, "u", (nid,)))
        elif member == "GetCapabilities":
            conn.send(new_method_return(msg, "as", (capabilities,)))
        elif member == "GetServerInformation":
            conn.send(new_method_return(msg, "ssss", ("fake", "tests", "1", "1.2")))
        elif member == "CloseNotification":
            conn.send(new_method_return(msg))
            conn.send(new_signal(emitter, "NotificationClosed", "uu", (msg.body[0], 3)))
        elif member == "Invoke":
            nid, key = msg.body
            conn.send(new_signal(emitter, "ActionInvoked", "us", (nid, key)))
            conn.send(new_method_return(msg))
        else:
            conn.send(new_error(msg, "org.freedesktop.DBus.Error.UnknownMethod"))


if __name__ == "__main__":
    caps = sys.argv[3].split(",") if len(sys.argv) > 3 else ["actions", "body"]
    main(sys.argv[1], sys.argv[2], caps)
