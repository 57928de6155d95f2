"""One way to wait for something: poll a condition until it holds or the time is up."""
import time


class TimedOut(AssertionError):
    pass


def wait_until(condition, timeout, what="the condition", interval=0.25, stop_early=None):
    """Call `condition()` every `interval` seconds until it returns something truthy, and return
    that; raise TimedOut naming `what` after `timeout` seconds. `stop_early()`, when given and true,
    ends the wait at once with TimedOut (a process that died will never make it true)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if stop_early is not None and stop_early():
            raise TimedOut(f"gave up waiting for {what}: it can no longer happen")
        if time.monotonic() >= deadline:
            raise TimedOut(f"{what} did not happen within {timeout:g} s")
        time.sleep(interval)
