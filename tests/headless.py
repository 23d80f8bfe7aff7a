"""A small headless-Chromium driver for the browser tests: the DevTools protocol over a pipe.

Standard library only. Chromium is started with ``--remote-debugging-pipe``: it
reads protocol commands (JSON, each ended by a NUL byte) on its fd 3 and writes
replies and events on its fd 4, so no port, websocket or browser download is
involved. Host names other than 127.0.0.1 do not resolve in this browser, and
every request a page makes is recorded, so a test can show that a page loads
nothing from the network.
"""
from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable

# The flags this project's machines need (root, no GPU, no sandbox), and no traffic of
# Chromium's own; MAP * ~NOTFOUND makes every host name but 127.0.0.1 fail to resolve.
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
    "--no-default-browser-check", "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--window-size=1280,900", "--remote-debugging-pipe",
]


def find_chromium() -> str | None:
    """$CHROMIUM, else chromium / chromium-browser on PATH, else /usr/bin/chromium."""
    for candidate in (os.environ.get("CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                      "/usr/bin/chromium"):
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    return None


class ProtocolError(RuntimeError):
    pass


class Chromium:
    """One headless browser; ``new_page()`` opens a tab. Use as a context manager."""

    def __init__(self, executable: str, profile_dir: Path, log_path: Path | None = None):
        commands_r, commands_w = os.pipe()  # we write, Chromium reads on fd 3
        replies_r, replies_w = os.pipe()   # Chromium writes on fd 4, we read

        def remap_fds() -> None:  # in the child, before exec: put the pipe ends on fds 3 and 4
            high_r = fcntl.fcntl(commands_r, fcntl.F_DUPFD, 10)
            high_w = fcntl.fcntl(replies_w, fcntl.F_DUPFD, 10)
            os.dup2(high_r, 3)  # dup2 leaves 3 and 4 inheritable
            os.dup2(high_w, 4)

        self._log = open(log_path, "wb") if log_path else subprocess.DEVNULL
        self.process = subprocess.Popen(
            [executable, *FLAGS, f"--user-data-dir={profile_dir}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
            close_fds=False, preexec_fn=remap_fds)
        os.close(commands_r)
        os.close(replies_w)
        self._out = os.fdopen(commands_w, "wb", buffering=0)
        self._in = replies_r
        self._next_id = 0
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._replies: dict[int, dict] = {}
        self._listeners: list[Callable[[dict], None]] = []
        self._closed = False
        self._reader = threading.Thread(target=self._read_loop, name="chromium-cdp", daemon=True)
        self._reader.start()
        self.version = self.send("Browser.getVersion", timeout=60)["product"]

    # -- protocol ---------------------------------------------------------------------------
    def _read_loop(self) -> None:
        buffer = b""
        while True:
            try:
                chunk = os.read(self._in, 1 << 20)
            except OSError:
                chunk = b""
            if not chunk:
                break
            buffer += chunk
            *messages, buffer = buffer.split(b"\0")
            for raw in messages:
                message = json.loads(raw)
                if "id" in message:
                    with self._cond:
                        self._replies[message["id"]] = message
                        self._cond.notify_all()
                else:
                    for listener in list(self._listeners):
                        listener(message)
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = 30) -> dict:
        with self._lock:
            self._next_id += 1
            call_id = self._next_id
            message: dict[str, Any] = {"id": call_id, "method": method, "params": params or {}}
            if session:
                message["sessionId"] = session
            self._out.write(json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        with self._cond:
            while call_id not in self._replies:
                if self._closed:
                    raise ProtocolError(f"Chromium exited (code {self.process.poll()}) during {method}")
                if not self._cond.wait(timeout=max(0.0, deadline - time.monotonic())) and \
                        time.monotonic() >= deadline:
                    raise TimeoutError(f"no reply to {method} within {timeout} s")
            reply = self._replies.pop(call_id)
        if "error" in reply:
            raise ProtocolError(f"{method}: {reply['error'].get('message')} {reply['error'].get('data', '')}")
        return reply.get("result", {})

    def new_page(self, width: int = 1280, height: int = 900) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, target, session, width, height)

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.send("Browser.close", timeout=10)
                self.process.wait(timeout=10)
            except Exception:  # noqa: BLE001 - best effort, then kill our own child
                self.process.kill()
                self.process.wait(timeout=10)
        self._out.close()
        if self._log is not subprocess.DEVNULL:
            self._log.close()

    def __enter__(self) -> "Chromium":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Page:
    """A tab. Records its requests, failed loads, console errors and uncaught exceptions."""

    def __init__(self, browser: Chromium, target: str, session: str, width: int, height: int):
        self.browser, self.target, self.session = browser, target, session
        self.requests: list[str] = []          # every URL the page asked for
        self.failures: list[str] = []          # requests that failed or answered >= 400
        self._urls: dict[str, str] = {}        # requestId -> URL
        self.errors: list[str] = []            # uncaught exceptions and console errors
        self._loaded: set[str] = set()         # loaderIds whose document fired "load"
        self._load_cond = threading.Condition()
        browser._listeners.append(self._on_event)
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.send(f"{domain}.enable")
        self.send("Page.setLifecycleEventsEnabled", {"enabled": True})
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
        self.send("Emulation.setFocusEmulationEnabled", {"enabled": True})

    def _on_event(self, event: dict) -> None:
        if event.get("sessionId") != self.session:
            return
        method, params = event["method"], event.get("params", {})
        if method == "Page.lifecycleEvent" and params.get("name") == "load":
            with self._load_cond:
                self._loaded.add(params["loaderId"])
                self._load_cond.notify_all()
        elif method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
            self._urls[params["requestId"]] = params["request"]["url"]
        elif method == "Network.responseReceived":
            status = params["response"]["status"]
            if status >= 400:
                self.failures.append(f"{status} {params['response']['url']}")
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            url = self._urls.get(params["requestId"], "?")
            self.failures.append(f"{params.get('errorText')} {url}")
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"uncaught: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append("console.error: " + " ".join(
                str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            entry = params["entry"]
            self.errors.append(f"{entry.get('source')}: {entry.get('text')} {entry.get('url', '')}".strip())

    def send(self, method: str, params: dict | None = None, timeout: float = 30) -> dict:
        return self.browser.send(method, params, session=self.session, timeout=timeout)

    def goto(self, url: str, timeout: float = 60) -> None:
        """Open url and wait for its load event (that of this navigation, not an earlier one)."""
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise ProtocolError(f"navigating to {url}: {result['errorText']}")
        loader = result.get("loaderId")
        with self._load_cond:
            if not self._load_cond.wait_for(lambda: loader in self._loaded, timeout=timeout):
                raise TimeoutError(f"{url}: no load event within {timeout} s")

    def evaluate(self, expression: str, timeout: float = 30) -> Any:
        """Value of a JavaScript expression (awaited if it is a promise), as JSON."""
        result = self.send("Runtime.evaluate", {"expression": expression, "awaitPromise": True,
                                                "returnByValue": True, "timeout": int(timeout * 1000)},
                           timeout=timeout + 5)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise ProtocolError("JavaScript: " + (details.get("exception", {}).get("description")
                                                  or details.get("text", "")))
        return result["result"].get("value")

    def press(self, key: str, code: int) -> None:
        """Press and release a key (e.g. 'End', 35) in the focused element."""
        for kind in ("rawKeyDown", "keyUp"):
            self.send("Input.dispatchKeyEvent", {"type": kind, "key": key, "code": key,
                                                 "windowsVirtualKeyCode": code, "nativeVirtualKeyCode": code})

    def screenshot(self, path: Path | None = None, clip: dict | None = None, max_height: int = 16000) -> bytes:
        """PNG of the whole page, or of ``clip`` (page coordinates, a region inside the viewport:
        scroll it into view first); written to ``path`` if given."""
        # Capturing beyond the viewport lays the page out again in a window as tall as the
        # page, which can move things: only for the whole page.
        whole = clip is None
        if whole:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            clip = {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], max_height)}
        data = base64.b64decode(self.send("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": whole, "clip": {**clip, "scale": 1}}, timeout=60)["data"])
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        return data

    def close(self) -> None:
        if self._on_event in self.browser._listeners:
            self.browser._listeners.remove(self._on_event)
        try:
            self.browser.send("Target.closeTarget", {"targetId": self.target}, timeout=10)
        except (ProtocolError, TimeoutError):
            pass
