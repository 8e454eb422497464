"""kombu's filesystem transport (the embedded broker that needs no server) with message files written atomically.

kombu 5's ``filesystem`` transport creates a message file under its final name, then writes it; a consumer polling
the folder moves and reads any file with the queue's name, so it can take a file that is still empty and fail
with ``JSONDecodeError`` -- which stops the Celery worker (``Unrecoverable error``), and loses the message. Seen
in the Spark demo on a loaded machine: the worker died after six minutes and the demo stopped early. Here a
message is written under a name consumers skip (``<name>.msg.part``: the queue part no longer ends in ``.msg``)
and renamed into place with ``os.replace``, atomic within a folder on POSIX: a consumer sees a whole message or
none. ``autoscaler.celery`` registers this class for ``filesystem://`` URLs."""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

#: the name a message file has while it is written (consumers match ``*.<queue>.msg`` only)
PARTIAL_SUFFIX = ".part"


class Channel(filesystem.Channel):
    """A filesystem channel whose messages appear whole (module docstring)."""

    def _put(self, queue: str, payload: Any, **kwargs: Any) -> None:
        """Put ``payload`` on ``queue``: written under a partial name, then renamed to kombu's message name."""
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = final + PARTIAL_SUFFIX
        try:
            with open(partial, "wb", buffering=0) as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    """kombu's filesystem transport with :class:`Channel`."""

    Channel = Channel
