"""Drives redis-py's `Lock` for the interoperability tests, one command per line.

Usage: redis_py_lock.py REDIS_URL

Reads one command per line on stdin and answers one line on stdout:

    acquire NAME TIMEOUT_MS BLOCKING_TIMEOUT_MS  -> acquired TOKEN | busy
    release NAME                                 -> released | not-owned
    extend NAME ADDITIONAL_MS                    -> extended | not-owned
    owned NAME                                   -> true | false
    release-token NAME TOKEN                     -> released | not-owned
    quit                                         -> (exits, no answer)

BLOCKING_TIMEOUT_MS 0 makes one non-blocking try; otherwise redis-py blocks, polling every
0.1 s (its default), for at most that long. TIMEOUT_MS 0 means no expiry. Any other failure
answers `error MESSAGE`. The locks held are kept by name; a release that answers `released`
or `not-owned` forgets the name. The driver exits when stdin closes, so it dies with the
process that started it.
"""

import math
import os
import sys

import redis
from redis.exceptions import LockNotOwnedError


def seconds(ms):
    """The seconds redis-py turns back into exactly `ms` milliseconds.

    redis-py converts with int(seconds * 1000), which truncates: 1.001 s becomes 1000 ms.
    So take the smallest float at or above ms / 1000 that survives the round trip.
    """
    value = ms / 1000
    while int(value * 1000) < ms:
        value = math.nextafter(value, math.inf)
    return value


class Driver:
    def __init__(self, url):
        self.client = redis.Redis.from_url(url)
        self.locks = {}

    def acquire(self, name, timeout_ms, blocking_timeout_ms):
        timeout_ms, blocking_timeout_ms = int(timeout_ms), int(blocking_timeout_ms)
        lock = self.client.lock(name, timeout=seconds(timeout_ms) if timeout_ms else None)
        if blocking_timeout_ms == 0:
            acquired = lock.acquire(blocking=False)
        else:
            acquired = lock.acquire(
                blocking=True, blocking_timeout=blocking_timeout_ms / 1000
            )
        if not acquired:
            return "busy"
        self.locks[name] = lock
        return "acquired " + lock.local.token.decode()

    def release(self, name):
        lock = self.held(name)
        try:
            lock.release()
        except LockNotOwnedError:
            del self.locks[name]
            return "not-owned"
        del self.locks[name]
        return "released"

    def extend(self, name, additional_ms):
        try:
            self.held(name).extend(seconds(int(additional_ms)))
        except LockNotOwnedError:
            return "not-owned"
        return "extended"

    def owned(self, name):
        lock = self.locks.get(name)
        return "true" if lock is not None and lock.owned() else "false"

    def release_token(self, name, token):
        lock = self.client.lock(name)
        lock.local.token = token.encode()
        try:
            lock.release()
        except LockNotOwnedError:
            return "not-owned"
        return "released"

    def held(self, name):
        try:
            return self.locks[name]
        except KeyError:
            raise LookupError("no lock held under " + name) from None


COMMANDS = {
    "acquire": (Driver.acquire, 3),
    "release": (Driver.release, 1),
    "extend": (Driver.extend, 2),
    "owned": (Driver.owned, 1),
    "release-token": (Driver.release_token, 2),
}


def answer(driver, line):
    words = line.split()
    if not words:
        return "error empty command"
    command = COMMANDS.get(words[0])
    if command is None:
        return "error unknown command " + words[0]
    method, arity = command
    if len(words) - 1 != arity:
        return f"error {words[0]} takes {arity} arguments, got {len(words) - 1}"
    try:
        return method(driver, *words[1:])
    except Exception as error:  # Reported to the test, which decides.
        message = " ".join(f"{type(error).__name__}: {error}".split())
        return "error " + message


def main():
    driver = Driver(sys.argv[1])
    while True:
        line = sys.stdin.readline()
        if not line or line.strip() == "quit":
            return
        sys.stdout.write(answer(driver, line) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    try:
        main()
    except (BrokenPipeError, KeyboardInterrupt):
        # The test process is gone: leave quietly, without a flush error at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
